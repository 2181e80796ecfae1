"""What the settings table (docs/reference/settings.md, ``--help <group>``) prints for an option of a group is what
that option composes to: for every option of every group in conf/, every key's composed value equals the table's
default for it (the one value the options agree on, or the option's own ``option: value``)."""

from __future__ import annotations

import pytest
from hydra import compose, initialize_config_dir
from omegaconf import DictConfig, ListConfig, OmegaConf

from ao_calib.config.compose import CONF_DIR, register_schemas, validate_plugins
from ao_calib.config.help_text import settings_sections, topic_help
from ao_calib.core.settings import shown_value

# Groups whose options are config files; each composed beside options that pull in no recipe or preset (a recipe,
# conf/recipe/<task>_<model>_<trainer>.yaml, sets its own values over the options', as a preset does).
GROUPS = ("model", "trainer", "warmup", "task", "reward", "judge", "logger", "paths")
BESIDE = {"model": ["trainer=sft"]}
NEUTRAL = ["model=tiny_qwen3"]


def option_cases() -> list[tuple[str, str]]:
    return [(group, path.stem) for group in GROUPS for path in sorted(CONF_DIR.joinpath(group).glob("*.yaml"))]


@pytest.fixture(scope="module")
def table() -> dict[str, dict]:
    register_schemas()
    return {group: {row.key: row for row in rows} for group, _, rows in settings_sections()}


def composed_group(group: str, option: str) -> DictConfig:
    overrides = [*BESIDE.get(group, NEUTRAL), f"{group}={option}"]
    with initialize_config_dir(config_dir=str(CONF_DIR), version_base="1.3"):
        cfg = compose("config", overrides=overrides)
    validate_plugins(cfg)  # the plug-in groups typed by their class's schema, as a run has them
    return cfg._get_node(group)


def shown(node) -> str:
    """A composed value as the table prints it: an interpolation as written, a nested schema as set or null."""
    if node._is_interpolation():
        return shown_value(node._value())
    if isinstance(node, (DictConfig, ListConfig)):
        return shown_value(None if node._is_none() else OmegaConf.to_container(node))
    return shown_value(node._value())


def table_value(row, option: str) -> str | None:
    """The table's default of ``row`` for ``option``; None where the row does not list the option."""
    if row.options and option not in row.options:
        return None
    for part in row.default.split("; "):
        if part.startswith(f"{option}: "):
            return part.removeprefix(f"{option}: ")
    return row.default


@pytest.mark.parametrize(("group", "option"), option_cases())
def test_each_composed_key_is_what_the_settings_table_prints(table, group, option):
    node = composed_group(group, option)
    rows = table[group]
    checked, differ = 0, []
    for key, row in rows.items():
        parent, child = node, None
        for part in key.removeprefix(group + ".").split("."):
            has = isinstance(parent, DictConfig) and not parent._is_none() and part in parent
            child = parent._get_node(part) if has else None
            if child is None:
                break
            parent = child
        expected = table_value(row, option)
        if child is None:
            assert expected is None, f"{key}: the table gives {option} a value, but {group}={option} has no such key"
            continue
        assert expected is not None, f"{key}: {group}={option} has it, but the table lists it for {row.options}"
        value = shown(child)
        if isinstance(child, DictConfig) and expected == "{...}":  # a nested schema the option sets: its keys follow
            value = expected
        checked += 1
        if value != expected:
            differ.append(f"{key}: composes to {value}, the table prints {expected}")
    assert differ == []
    assert checked >= 2


def test_the_warmup_table_prints_what_warmup_sft_composes_to():
    """The warm-up's values that once lived in conf/warmup/sft.yaml only are the table's and --help's."""
    text, status = topic_help("warmup.lr")
    assert status == 0 and "  default: 0.0001" in text.splitlines()
    steps, _ = topic_help("warmup.max_steps")
    assert "  default: format: 100; sft: 200" in steps.splitlines()
    node = composed_group("warmup", "sft")
    assert (node.lr, node.max_steps, node.save_steps, node.logging_steps) == (1e-4, 200, 100000, 10)
