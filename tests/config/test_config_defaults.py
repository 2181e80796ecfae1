"""Each default is stated once: in its schema. A config file sets only what it changes, so no file states a value
its schema (for a group file) or the config it builds on (for a preset) already gives."""

from __future__ import annotations

import pytest
import yaml
from hydra.core.config_store import ConfigStore
from omegaconf import OmegaConf

from ao_calib.core.plugins import plugin_class
from tests.helpers.configs import composed, options
from tests.helpers.paths import CONF_DIR

FRAMEWORK_GROUPS = ["model", "trainer", "warmup", "logger", "paths"]
PLUGIN_GROUPS = ["task", "judge"]


def leaves(node, prefix=""):
    """(dotted key, value) for every leaf a YAML body sets."""
    if isinstance(node, dict):
        for key, value in node.items():
            yield from leaves(value, f"{prefix}{key}.")
    else:
        yield prefix.rstrip("."), node


def body(path) -> dict:
    data = yaml.safe_load(path.read_text()) or {}
    data.pop("defaults", None)
    return data


def get(cfg, key):
    return OmegaConf.select(cfg, key, throw_on_missing=False, default="<absent>")


def restated(data: dict, reference) -> list[str]:
    """Keys whose value in ``data`` equals ``reference``'s (interpolations and the group's name excepted)."""
    found = []
    for key, value in leaves(data):
        if key in ("name", "_target_") or (isinstance(value, str) and "${" in value):
            continue
        theirs = get(reference, key)
        theirs = OmegaConf.to_container(theirs) if OmegaConf.is_config(theirs) else theirs
        if theirs == value:
            found.append(f"{key}={value!r}")
    return found


def schema_of_group_file(group: str, path):
    defaults = yaml.safe_load(path.read_text()).get("defaults", [])
    schema_name = next(d for d in defaults if isinstance(d, str))
    node = ConfigStore.instance().load(f"{group}/{schema_name}.yaml").node
    return OmegaConf.structured(node)


@pytest.mark.parametrize("group,option", [(g, o) for g in FRAMEWORK_GROUPS for o in options(g)])
def test_framework_group_files_set_only_what_differs_from_the_schema(group, option):
    path = CONF_DIR / group / f"{option}.yaml"
    assert restated(body(path), schema_of_group_file(group, path)) == []


@pytest.mark.parametrize("group,option", [(g, o) for g in PLUGIN_GROUPS for o in options(g)])
def test_plugin_group_files_set_only_what_differs_from_their_class_schema(group, option):
    data = body(CONF_DIR / group / f"{option}.yaml")
    cls = plugin_class(group, data.get("_target_"))
    if cls is None:
        return
    assert restated(data, OmegaConf.structured(cls.config_class)) == []


def preset_base(option: str) -> list[str]:
    """The overrides that give what a preset builds on: its group choices and any preset it extends."""
    overrides, extends = [], []
    for entry in yaml.safe_load((CONF_DIR / "experiment" / f"{option}.yaml").read_text()).get("defaults", []):
        if isinstance(entry, dict):
            ((key, value),) = entry.items()
            overrides.append(f"{key.replace('override /', '')}={value}")
        elif entry != "_self_":
            extends.append(entry)
    return ([f"experiment={extends[0]}"] if extends else []) + overrides


@pytest.mark.parametrize("option", options("experiment"))
def test_presets_set_only_what_they_change(option):
    base = composed(preset_base(option))
    assert restated(body(CONF_DIR / "experiment" / f"{option}.yaml"), base) == []
