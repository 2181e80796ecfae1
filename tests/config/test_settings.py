"""Each setting has one home: its schema's field, with its default, its help text and the values it allows.
``--help <group>``, ``--help <key>`` and the settings reference page (docs/reference/settings.md) are generated from
there and cannot drift; every help text is short; every key of every preset's composed config has exactly one
default, in code (the YAML files only override); the range checks live in the schemas (no range table beside them)."""

from __future__ import annotations

import dataclasses
import functools
import re

import pytest
from omegaconf import DictConfig, ListConfig, OmegaConf

from ao_calib.config import help_text
from ao_calib.config.help_text import settings_page, settings_sections, topic_help
from ao_calib.core.settings import HELP, help_of, nested_schema, type_hints
from ao_calib.trainers.config import GRPOTrainerConfig
from tests.helpers.commands import run_cli
from tests.helpers.configs import composed, options
from tests.helpers.paths import PROJECT_ROOT
from tests.helpers.schemas import every_registered_schema, schemas_in_use

SETTINGS_PAGE = PROJECT_ROOT / "docs" / "reference" / "settings.md"
HELP_LIMIT = 300  # characters: what a key does in one or two sentences

# Keys every option of their group names itself: no default can serve (which model, which files, which class).
REQUIRED = {"model.name", "model.num_hidden_layers", "model.gguf.distribution", "model.gguf.file", "task.name",
            "judge.name", "reward.name", "paths.root_dir", "paths.output_dir", "paths.cache_dir",
            "paths.data_dir"}


def test_settings_page_is_generated_from_the_schemas():
    assert SETTINGS_PAGE.read_text() == settings_page(), (
        "docs/reference/settings.md differs from the schemas: regenerate it with "
        "`python -m ao_calib.config.settings_doc --output docs/reference/settings.md`")


def test_settings_doc_writes_the_page_to_a_given_path(tmp_path):
    target = tmp_path / "site" / "reference" / "settings.md"
    result = run_cli("ao_calib.config.settings_doc", "--output", str(target))
    assert result.returncode == 0, result.stderr[-2000:]
    assert target.read_text() == settings_page()


def test_every_field_of_every_schema_has_help_text():
    missing = []
    for schema in schemas_in_use():
        for field in dataclasses.fields(schema):
            owner = next(c for c in schema.__mro__ if field.name in getattr(c, "__dataclass_fields__", {}))
            helps = [c.__dataclass_fields__[field.name].metadata.get(HELP) for c in schema.__mro__
                     if field.name in getattr(c, "__dataclass_fields__", {})]
            if not any(helps):
                missing.append(f"{owner.__name__}.{field.name}")
    assert missing == []


def test_every_help_text_is_short():
    too_long = [f"{schema.__name__}.{field.name}: {len(field.metadata.get(HELP, ''))}"
                for schema in every_registered_schema() for field in dataclasses.fields(schema)
                if len(field.metadata.get(HELP, "")) > HELP_LIMIT]
    too_long += [f"group {group}: {len(what)}" for group, what, _ in settings_sections() if len(what) > HELP_LIMIT]
    assert too_long == []


def test_help_is_short_and_says_how_to_ask_for_more():
    result = run_cli("ao_calib.run", "--help")
    assert result.returncode == 0, result.stderr[-2000:]
    lines = result.stdout.splitlines()
    assert 15 <= len(lines) <= 60
    assert "  trainer: grpo, ppo, rloo, sft" in lines
    assert "python -m ao_calib.run experiment=quickstart" in result.stdout
    assert "--help trainer.lr" in result.stdout and "--help trainer " in result.stdout


def test_help_for_one_key_gives_its_default_range_options_and_text():
    result = run_cli("ao_calib.run", "--help", "trainer.lr")
    assert result.returncode == 0, result.stderr[-2000:]
    lines = result.stdout.splitlines()
    assert lines[0] == "trainer.lr" and len(lines) <= 10
    assert "  default: 1e-05" in lines and "  allowed: > 0" in lines
    assert "  options: grpo, ppo, rloo, sft (the trainer options that have it)" in lines
    assert help_of(GRPOTrainerConfig, "lr") in result.stdout
    beta = run_cli("ao_calib.run", "experiment=quickstart", "--help", "trainer.beta")
    assert beta.returncode == 0 and "  options: grpo, rloo (the trainer options that have it)" in beta.stdout
    assert "  default: grpo: 0.1; rloo: 0.05" in beta.stdout


def test_help_for_a_group_lists_its_keys():
    result = run_cli("ao_calib.run", "--help", "trainer")
    assert result.returncode == 0, result.stderr[-2000:]
    trainer_rows = next(rows for group, _, rows in settings_sections() if group == "trainer")
    listed = re.findall(r"^  (trainer\.[\w.]+) = ", result.stdout, re.M)
    assert listed == [row.key for row in trainer_rows] and "trainer.lr" in listed
    assert result.stdout.splitlines()[0].startswith("trainer.*: the training stage")
    assert "trainer.lr = 1e-05  (allowed > 0)" in result.stdout


def test_help_for_an_unknown_key_names_close_matches():
    result = run_cli("ao_calib.run", "--help", "trainer.lrr")
    assert result.returncode == 2
    message = result.stderr.splitlines()[-1]
    assert message.startswith("error: no setting or group named 'trainer.lrr'. Did you mean: trainer.lr")
    bare, status = topic_help("lr")
    assert status == 2 and "trainer.lr" in bare and "warmup.lr" in bare


def test_help_covers_every_key_and_group(monkeypatch):
    # the sections once for the ~300 pages asked for here (a user's --help asks for one)
    monkeypatch.setattr(help_text, "settings_sections", functools.cache(settings_sections))
    for group, _, rows in settings_sections():
        text, status = topic_help(group)
        assert status == 0
        for row in rows:
            assert f"  {row.key} = " in text, f"--help {group} does not list {row.key}"
            key_text, key_status = topic_help(row.key)
            assert key_status == 0 and key_text.startswith(row.key + "\n")
    lam, _ = topic_help("task.calibration.lam")
    assert "  default: 0.5" in lam and "  allowed: >= 0" in lam and "λ in informativeness" in lam
    presets, status = topic_help("experiment")
    assert status == 0 and all(f"  {name}" in presets for name in options("experiment"))
    for key in ("warmup.tag_loss_fraction", "warmup.confidence", "eval.num_samples", "model.lora.rank"):
        assert topic_help(key)[1] == 0


def typed_leaves(node, path: str, schema: type | None):
    """``(key, schema that should declare it, field name)`` of every key under ``node``; values of untyped fields
    (dicts a user fills: reward weights, chat template options) are data, not keys."""
    if isinstance(node, ListConfig):
        for i in range(len(node)):
            child = node._get_node(i)
            if isinstance(child, DictConfig):
                yield from typed_leaves(child, f"{path}.{i}", OmegaConf.get_type(child))
        return
    for key in node.keys():
        full = f"{path}.{key}" if path else str(key)
        yield full, schema, key
        child = node._get_node(key)
        if schema is None or not dataclasses.is_dataclass(schema) or key not in type_hints(schema):
            continue
        nested = nested_schema(type_hints(schema)[key])
        if isinstance(child, DictConfig) and not child._is_none() and nested is not None:
            yield from typed_leaves(child, full, OmegaConf.get_type(child))
        elif isinstance(child, ListConfig) and not child._is_none():
            yield from typed_leaves(child, full, None)


@pytest.mark.parametrize("experiment", options("experiment"))
def test_every_key_of_every_preset_has_exactly_one_default_in_code(experiment):
    """Every key of the composed preset is a field of the schema typing its node, and that field states the
    default (YAML files only override it: tests/config/test_config_defaults.py checks they restate none)."""
    cfg = composed([f"experiment={experiment}"])
    with_hydra_removed = {k: cfg._get_node(k) for k in cfg.keys() if k != "hydra"}
    problems = []
    for top, node in with_hydra_removed.items():
        if not isinstance(node, DictConfig) or node._is_none():
            continue
        for key, schema, name in typed_leaves(node, top, OmegaConf.get_type(node)):
            if schema is None or not dataclasses.is_dataclass(schema):
                problems.append(f"{key}: its node has no schema")
                continue
            fields = {f.name: f for f in dataclasses.fields(schema)}
            if name not in fields:
                problems.append(f"{key}: not a field of {schema.__name__} (a key only in YAML)")
                continue
            field = fields[name]
            has_default = (field.default is not dataclasses.MISSING and field.default != "???") or \
                field.default_factory is not dataclasses.MISSING
            generic = re.sub(r"^(trainer|warmup)\.", "", key)
            if not has_default and key not in REQUIRED and generic not in ("_target_", "name"):
                problems.append(f"{key}: {schema.__name__}.{name} states no default")
    assert problems == []


def test_no_range_table_beside_the_schemas():
    for folder in ("ao_calib", "tasks"):
        for path in (PROJECT_ROOT / folder).rglob("*.py"):
            assert "VALUE_RANGES" not in path.read_text(), path


def test_a_schema_built_in_code_refuses_a_value_out_of_range():
    from ao_calib.calibration import CalibrationConfig
    from ao_calib.core.errors import AOCalibError
    from ao_calib.trainers.config import GRPOTrainerConfig, SFTTrainerConfig

    with pytest.raises(ValueError, match=r"^beta=-1: out of range, allowed >= 0$"):
        GRPOTrainerConfig(beta=-1)
    with pytest.raises(ValueError, match=r"^num_generations=1: out of range, allowed >= 2$"):
        GRPOTrainerConfig(num_generations=1)
    with pytest.raises(ValueError, match=r"^tag_loss_fraction=1.5: out of range, allowed \[0, 1\]$"):
        SFTTrainerConfig(tag_loss_fraction=1.5)
    with pytest.raises(AOCalibError, match=r"^task.calibration.credit=x: not allowed, choose one of sequence, "
                                           r"calibration, group, probability$"):
        CalibrationConfig(credit="x")  # a schema that knows its place in the config names its full key
    assert GRPOTrainerConfig(epsilon_high=None).epsilon_high is None  # null where the type is Optional


@pytest.mark.parametrize("override,message", [
    ("warmup.tag_loss_fraction=1.5", "warmup.tag_loss_fraction=1.5: out of range, allowed [0, 1]"),
    ("trainer.lora.rank=0", "trainer.lora.rank=0: out of range, allowed >= 1 or null"),
    ("model.lora.dropout=1", "model.lora.dropout=1.0: out of range, allowed [0, 1)"),
    ("task.calibration.credit=x", "task.calibration.credit=x: not allowed, choose one of sequence, calibration, "
                                  "group, probability"),
    ("alerts.patience=0", "alerts.patience=0: out of range, allowed >= 1"),
])
def test_start_up_check_names_the_full_key(override, message):
    from ao_calib.config.compose import check_values
    from ao_calib.config.compose import compose_run_config
    from ao_calib.core.errors import AOCalibError

    with pytest.raises(AOCalibError) as info:
        check_values(compose_run_config(["experiment=quickstart", override]))
    assert str(info.value) == message
