"""Every config in every group composes and matches its schema; bad keys and values are refused by name."""

from __future__ import annotations

import subprocess
import sys

import pytest
import torch
from omegaconf import OmegaConf, open_dict

from ao_calib.config.compose import unknown_keys
from ao_calib.config.schema import Config
from ao_calib.preflight.resources import RECIPE_GROUPS
from tests.helpers.commands import run_cli
from tests.helpers.paths import PROJECT_ROOT
from tests.helpers.configs import composed, options

GROUPS = ["task", "model", "trainer", "reward", "judge", "logger", "paths", "warmup"]


def check_valid(cfg) -> None:
    assert unknown_keys(cfg) == []
    OmegaConf.resolve(cfg)
    with open_dict(cfg):
        cfg.pop("hydra")
    assert OmegaConf.missing_keys(cfg) == set()
    assert isinstance(OmegaConf.to_object(cfg), Config)


@pytest.mark.parametrize("group,option", [(g, o) for g in GROUPS for o in options(g)])
def test_every_group_option_composes(group, option):
    overrides = [f"{group}={option}"]
    if group in RECIPE_GROUPS:  # the default task and model's recipe sets these itself and refuses another choice
        overrides.append("~recipe")
    if group == "reward":  # reward mixes belong to the task they are named after
        overrides.append("task=" + next(t for t in options("task") if t in option))
    check_valid(composed(overrides))


@pytest.mark.parametrize("experiment", options("experiment"))
def test_every_experiment_composes(experiment):
    cfg = composed([f"experiment={experiment}"])
    check_valid(cfg)
    assert cfg.reward.name.startswith(cfg.task.name)  # each preset pairs its task with that task's rewards


def test_default_composition_is_the_headline_task():
    cfg = composed([])
    assert (cfg.task.name, cfg.model.name, cfg.trainer.name) == ("oracle", "qwen3_8b", "grpo")
    assert cfg.reward.name == "oracle"


def test_model_configs_carry_what_steering_needs():
    for name in options("model"):
        cfg = composed([f"model={name}"])
        m = cfg.model
        assert m.num_hidden_layers > 0
        assert m.lora.rank > 0 and m.lora.target_modules
        assert (m.hub_id is None) == (m.tiny is not None)
    assert composed(["model=qwen3_8b"]).model.ao_lora_id.endswith("posttrain_Qwen3-8B")
    assert "gemma-3-27b-it" in composed(["model=gemma3_27b"]).model.ao_lora_id


def test_misspelt_key_is_rejected_with_its_name():
    with pytest.raises(Exception, match="trainer.lrr"):
        composed(["trainer.lrr=1"])


def test_wrong_type_is_rejected_with_its_name():
    with pytest.raises(Exception) as info:
        composed(["trainer.lr=abc"])
    assert "trainer.lr" in str(info.value) + str(info.value.__cause__)


def test_misspelt_or_mistyped_plugin_key_is_rejected_with_its_name():
    assert unknown_keys(composed(["+task.lamm=1"])) == ["task.lamm"]
    assert unknown_keys(composed(["judge=litellm", "+judge.max_tokenz=3"])) == ["judge.max_tokenz"]
    with pytest.raises(Exception) as info:
        composed(["task=oracle", "task.calibration.lam=abc"])
    assert "task.calibration.lam" in str(info.value) + str(info.value.__cause__)


def test_a_plugin_without_registered_schema_is_typed_by_its_class(tmp_path):
    """A task from another package whose YAML lists only what it sets still gets its schema's defaults and
    checks: ``validate_plugins`` applies the class's ``config_class`` after composition."""
    from omegaconf import OmegaConf

    from ao_calib.config.compose import validate_plugins

    cfg = OmegaConf.create({"task": {"_target_": "ao_calib_tasks.oracle.task.OracleTask", "name": "oracle",
                                     "activations": {"k": 3}}})
    validate_plugins(cfg)
    assert cfg.task.activations.k == 3 and cfg.task.calibration.lam == 0.5  # a schema default filled in
    bad = OmegaConf.create({"task": {"_target_": "ao_calib_tasks.oracle.task.OracleTask", "name": "oracle",
                                     "activations": {"kk": 3}}})
    with pytest.raises(Exception, match=r"task.activations.kk"):
        validate_plugins(bad)


def test_plugin_target_that_cannot_be_imported_is_named():
    with pytest.raises(Exception, match=r"task._target_=no_such_pkg.Task: cannot import"):
        composed(["task._target_=no_such_pkg.Task"])


def test_appended_unknown_key_is_found():
    cfg = composed(["+trainer.lrr=1", "+model.lora.rnak=3"])
    assert sorted(unknown_keys(cfg)) == ["model.lora.rnak", "trainer.lrr"]


def test_cli_rejects_misspelt_and_appended_keys():
    for bad in ("trainer.lrr=1", "+trainer.lrr=1", "+task.data.n_trian=3"):
        result = run_cli("ao_calib.run", "experiment=function_call_tiny", bad, "hydra.run.dir=/tmp/ao_calib_never")
        assert result.returncode != 0
        assert bad.lstrip("+").split("=")[0] in result.stderr
        assert "Traceback" not in result.stderr


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the no-GPU message")
def test_real_model_without_gpu_or_hub_stops_at_once(tmp_path):
    result = run_cli("ao_calib.run", "~recipe", "judge=label", f"hydra.run.dir={tmp_path / 'never'}",
                     timeout=60)  # the default model, without the design-note recipe (tests/e2e/test_seed_recipe.py)
    assert result.returncode == 2
    assert "needs:\n  - a CUDA GPU" in result.stderr and "Qwen/Qwen3-8B" in result.stderr
    assert "checkpoints_all_single_and_multi_pretrain_cls_latentqa_posttrain_Qwen3-8B" in result.stderr
    assert "model=tiny_qwen3" in result.stderr  # the user's own command, offline
    assert "Traceback" not in result.stderr


def test_help_loads_no_torch_and_composing_loads_no_transformers():
    """The run's config gathers every room's schema; none of them may pull in torch or transformers, so that
    ``--help`` stays light (an eager import in a package's ``__init__`` did once) and composing loads only what the
    task's class needs."""
    code = ("import sys; from ao_calib.config.compose import compose_run_config, register_schemas; "
            "from ao_calib.config.help_text import settings_sections; register_schemas(); settings_sections(); "
            "assert 'torch' not in sys.modules; compose_run_config(['experiment=quickstart']); "
            "bad = [m for m in ('transformers', 'trl', 'peft') if m in sys.modules]; assert not bad, bad")
    subprocess.run([sys.executable, "-c", code], check=True, timeout=120, cwd=PROJECT_ROOT)
