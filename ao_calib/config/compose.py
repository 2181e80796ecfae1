"""Composing a run's config: registering every schema with Hydra's ConfigStore, typing the plug-in groups (task, judge)
with their class's schema, and loading a saved run's config back."""

from __future__ import annotations

import ao_calib.config.help_text  # noqa: F401 -- registers ${ao_calib_groups:}, so a config with Hydra's node resolves
import ao_calib.runtime.distributed  # noqa: F401 -- registers ${run_started:}, which names the run directory
from ao_calib.config.checks import check_combinations
from ao_calib.config.schema import Config, LoggerConfig, PathsConfig, RewardConfig
from ao_calib.core.command_names import command
from ao_calib.core.errors import AOCalibError
from ao_calib.core.plugins import PLUGIN_GROUPS, PluginConfig, TaskConfig, plugin_class, register_plugin_schemas
from ao_calib.core.settings import SettingError, check_tree
from ao_calib.core.shipped import shipped_dir
from ao_calib.models.config import ModelConfig
from ao_calib.trainers.config import (FormatWarmupConfig, GRPOTrainerConfig, PPOTrainerConfig, RLOOTrainerConfig,
                                      SFTTrainerConfig, SFTWarmupConfig)

_registered = False


def register_schemas() -> None:
    """Stores in Hydra's ConfigStore every schema the config files build on (``defaults: [<name>_schema]``): the
    framework's, the shipped judges' and those of every installed plug-in package (``ao_calib.core.plugins``). Each
    entry point calls it before Hydra composes (``python -m ao_calib.run``, ``compose_run_config``); it runs once. A
    plug-in whose registration fails stops the run with its own error (``PluginError``)."""
    global _registered
    if _registered:
        return
    from hydra.core.config_store import ConfigStore

    from ao_calib.judges.config import register_configs as register_judge_schemas

    cs = ConfigStore.instance()
    cs.store(name="config_schema", node=Config)
    cs.store(group="model", name="model_schema", node=ModelConfig)
    cs.store(group="reward", name="reward_schema", node=RewardConfig)
    cs.store(group="trainer", name="grpo_schema", node=GRPOTrainerConfig)
    cs.store(group="trainer", name="sft_schema", node=SFTTrainerConfig)
    cs.store(group="trainer", name="rloo_schema", node=RLOOTrainerConfig)
    cs.store(group="trainer", name="ppo_schema", node=PPOTrainerConfig)
    cs.store(group="warmup", name="sft_warmup_schema", node=SFTWarmupConfig)
    cs.store(group="warmup", name="format_warmup_schema", node=FormatWarmupConfig)
    cs.store(group="logger", name="logger_schema", node=LoggerConfig)
    cs.store(group="paths", name="paths_schema", node=PathsConfig)
    register_judge_schemas()
    register_plugin_schemas()
    _registered = True


def validate_plugins(cfg, migrate: bool = False) -> None:
    """Types each plug-in group (task, judge) with its class's ``config_class`` schema, in place: fills the
    defaults the YAML leaves out, rejects a misspelt key or a wrongly typed value and checks every value,
    naming the key. A key the schema lists as moved (``renamed_keys``) is refused naming its new key, or, with
    ``migrate`` (a saved run's config), moved there."""
    from omegaconf import OmegaConf, open_dict
    from omegaconf.errors import OmegaConfBaseException

    for group in PLUGIN_GROUPS:
        node = cfg.get(group)
        if node is None:
            continue
        cls = plugin_class(group, node.get("_target_"))
        schema = getattr(cls, "config_class", None) or (TaskConfig if group == "task" else PluginConfig)
        moved_keys(node, schema, group, migrate=migrate)
        try:
            typed = OmegaConf.merge(OmegaConf.structured(schema), node)
        except OmegaConfBaseException as exc:
            key = f"{group}.{exc.full_key}" if getattr(exc, "full_key", None) else group
            reason = str(exc).splitlines()[0]
            raise AOCalibError(f"{key}: {reason} (schema {schema.__name__}; `{command('run')} --cfg job` "
                               "prints the config)") from None
        with open_dict(cfg):
            cfg[group] = typed
        check_group(cfg, group)


def renamed_keys(schema: type) -> dict[str, str]:
    """``{old key: new key}`` (dotted, below the group) of a schema and the schemas it extends."""
    found: dict[str, str] = {}
    for cls in reversed(schema.__mro__):
        found.update(vars(cls).get("renamed_keys", {}))
    return found


def moved_key_error(group: str, old: str, new: str) -> AOCalibError:
    """The one message a moved key is refused with, wherever it is given (a run, an override, an evaluation)."""
    return AOCalibError(f"{group}.{old} has moved: set {group}.{new} instead")


def moved_keys(node, schema: type, group: str, migrate: bool = False) -> None:
    """Refuses a key ``schema`` lists as moved, in one message naming where it went; with ``migrate``, moves its
    value there instead (a run saved before the move is read back as it ran)."""
    from omegaconf import OmegaConf, open_dict

    for old, new in renamed_keys(schema).items():
        if old not in node:  # old keys are the group's own (top-level) keys
            continue
        if not migrate:
            raise moved_key_error(group, old, new)
        with open_dict(node):
            OmegaConf.update(node, new, node.pop(old), merge=True, force_add=True)


def refuse_moved_overrides(argv: list[str]) -> None:
    """Refuses a command-line ``group.OLD=VALUE`` whose key a registered schema of that plug-in group lists as moved
    (``renamed_keys``), naming the new key. Checked before Hydra composes: Hydra would refuse the key as unknown to
    the schema without saying where it went."""
    from hydra.core.config_store import ConfigStore
    from omegaconf import OmegaConf

    for arg in argv:
        group, _, old = arg.lstrip("+~").partition("=")[0].partition(".")
        if group not in PLUGIN_GROUPS:
            continue
        schemas = [OmegaConf.get_type(entry.node) for entry in ConfigStore.instance().repo.get(group, {}).values()
                   if hasattr(entry, "node")]
        if any(old in getattr(schema, "__dataclass_fields__", {}) for schema in schemas):
            continue  # a key of another schema of the group, under that name
        for schema in schemas:
            new = renamed_keys(schema).get(old)
            if new:
                raise moved_key_error(group, old, new)


def check_values(cfg) -> None:
    """Every group of the composed config checked at start-up, before anything heavy (``check_group``)."""
    for group in list(cfg.keys()):
        if group != "hydra":
            check_group(cfg, group)


def check_group(cfg, group: str) -> None:
    """One group of the composed config, checked before any model loads: every value against the values its field
    allows (``ao_calib.core.settings``), the first one out of range refused naming its full key and what is allowed;
    then the group is built into its schema's objects once, so that each schema's own ``__post_init__`` checks
    run."""
    from omegaconf import DictConfig, OmegaConf
    from omegaconf.errors import OmegaConfBaseException

    node = cfg._get_node(group) if isinstance(cfg, DictConfig) else None
    if not isinstance(node, DictConfig) or node._is_none() or node._is_missing():
        return
    try:
        check_tree(node, group)
    except SettingError as exc:
        raise AOCalibError(str(exc)) from None
    try:
        OmegaConf.to_object(node)
    except OmegaConfBaseException:
        pass  # an unresolvable value is reported where it is used, with its own message
    except ValueError as exc:  # a schema's own check: its message names the key below the group
        message = str(exc)
        raise AOCalibError(message if message.startswith(f"{group}.") else f"{group}.{message}") from None


CONF_DIR = shipped_dir("conf")  # the installed package's copy, else the clone's


def compose_run_config(overrides=(), config_dir=CONF_DIR):
    """The config a run with these overrides sees, composed and with its plug-in groups typed: for tests,
    benchmarks and notebooks that build the pipeline's parts themselves."""
    from hydra import compose, initialize_config_dir

    register_schemas()
    with initialize_config_dir(config_dir=str(config_dir), version_base="1.3"):
        cfg = compose("config", overrides=list(overrides))
    validate_plugins(cfg)
    check_combinations(cfg)
    return cfg


def typed(node, schema: type):
    """A config node as an instance of ``schema``: converted as it is when composed against that schema, else
    (a saved run's config, read back as plain YAML) merged over the schema's defaults first."""
    from omegaconf import OmegaConf

    if OmegaConf.get_type(node) is not schema:
        node = OmegaConf.merge(OmegaConf.structured(schema), node)
    return OmegaConf.to_object(node)


def load_run_config(path):
    """A saved run's config (``config.yaml`` or Hydra's ``.hydra/config.yaml``), with its plug-in groups typed."""
    from omegaconf import OmegaConf

    cfg = OmegaConf.load(path)
    validate_plugins(cfg, migrate=True)
    return cfg


def unknown_keys(node, path: str = "") -> list[str]:
    """Keys present in a composed config but absent from its schema.

    Hydra's ``+key=value`` opens the node for writing, which lets a misspelt key into a structured config;
    this walk finds such keys so the run can refuse them.
    """
    import dataclasses

    from omegaconf import DictConfig, ListConfig, OmegaConf

    found: list[str] = []
    if isinstance(node, DictConfig):
        schema = OmegaConf.get_type(node)
        allowed = {f.name for f in dataclasses.fields(schema)} if dataclasses.is_dataclass(schema) else None
        for key in node.keys():
            full = f"{path}{key}"
            if path == "" and key == "hydra":  # Hydra's own node, present when composed with return_hydra_config
                continue
            if allowed is not None and key not in allowed:
                found.append(full)
                continue
            child = node._get_node(key)
            if isinstance(child, (DictConfig, ListConfig)):
                found += unknown_keys(child, full + ".")
    elif isinstance(node, ListConfig):
        for i in range(len(node)):
            child = node._get_node(i)
            if isinstance(child, (DictConfig, ListConfig)):
                found += unknown_keys(child, f"{path}{i}.")
    return found
