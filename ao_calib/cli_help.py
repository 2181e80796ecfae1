"""What ``python -m ao_calib.run --help`` lists: every config group with the options a user can pick.

Hydra's own list would also offer the typed schemas that config files build on (``model_schema``,
``grpo_schema``, ...): they live in the same ConfigStore groups so that ``defaults: [<name>_schema]`` works, but
picking one (``model=model_schema``) composes an empty model. The help template in ``conf/hydra/default.yaml``
calls ``${ao_calib_groups:}`` instead, which leaves them out.
"""

from __future__ import annotations

import dataclasses
import functools
import textwrap
from enum import Enum
from pathlib import Path

from omegaconf import OmegaConf

CONF_DIR = Path(__file__).resolve().parents[1] / "conf"

SCHEMA_SUFFIX = "_schema"
NOT_GROUPS = ("hydra", "accelerate")  # Hydra's own; accelerate's launcher files kept beside the configs


def selectable_groups() -> dict[str, list[str]]:
    """``{group: [options]}`` of the composed app, Hydra's own groups and ``*_schema`` entries left out."""
    from hydra.core.global_hydra import GlobalHydra
    from hydra.core.object_type import ObjectType

    if not GlobalHydra.instance().is_initialized():
        return {}
    loader = GlobalHydra.instance().config_loader()
    groups: dict[str, list[str]] = {}
    for group in sorted(loader.list_groups("")):
        if group in NOT_GROUPS:
            continue
        options = [name for name in loader.get_group_options(group, results_filter=ObjectType.CONFIG)
                   if not name.endswith(SCHEMA_SUFFIX)]
        if options:
            groups[group] = options
    return groups


def groups_text() -> str:
    """One line per group, escaped for the ``string.Template`` Hydra fills the help text with."""
    return "\n".join(f"  {group}: {', '.join(options)}" for group, options in selectable_groups().items()
                     ).replace("$", "$$")


OmegaConf.register_new_resolver("ao_calib_groups", groups_text, replace=True)


# --------------------------------------------------------------------------------------------- settings
# Every key a run reads, with its default and help, generated from the schemas' field metadata
# (ao_calib.settings): ``--help`` prints it as text (``${ao_calib_settings:}``) and README.md's settings table is
# ``python -m ao_calib.cli_help --markdown``, so neither can drift from the code.

MISSING_VALUE = "(required)"


@dataclasses.dataclass
class SettingRow:
    key: str
    default: str
    options: list[str]  # the options of the group that have the key; empty: all of them
    help: str
    allowed: str = ""  # the values it allows, where it limits them


def _shown(value) -> str:
    if isinstance(value, Enum):
        value = value.value
    if value is None:
        return "null"
    if isinstance(value, bool):
        return str(value).lower()
    if value == "???":
        return MISSING_VALUE
    if isinstance(value, str):
        return value.replace("\n", "\\n") if value else '""'
    return str(value).replace("'", "")


def _default(field: dataclasses.Field) -> str:
    if field.default is not dataclasses.MISSING:
        return _shown(field.default)
    if field.default_factory is not dataclasses.MISSING:
        return _shown(field.default_factory())
    return MISSING_VALUE


def _allowed(schema: type, field: dataclasses.Field) -> str:
    from ao_calib.settings import ALLOWED, is_optional, type_hints

    rule = field.metadata.get(ALLOWED)
    if rule is None:
        return ""
    return rule.describe() + (" or null" if is_optional(type_hints(schema)[field.name]) and not rule.choices else "")


def schema_fields(schema: type, prefix: str) -> list[tuple[str, str, str, str]]:
    """``(key, default, help, allowed)`` of every leaf of ``schema`` (nested schemas walked; an optional nested one
    is also listed itself, since null is a choice)."""
    from ao_calib.settings import help_of, is_optional, nested_schema, type_hints

    rows = []
    hints = type_hints(schema)
    for field in dataclasses.fields(schema):
        key = f"{prefix}.{field.name}"
        nested = nested_schema(hints[field.name])
        if nested is None or is_optional(hints[field.name]):
            rows.append((key, _default(field), help_of(schema, field.name), _allowed(schema, field)))
        if nested is not None:
            rows += schema_fields(nested, key)
    return rows


def group_rows(group: str, schemas: dict[str, type]) -> list[SettingRow]:
    """One row per key of ``group`` over its options' schemas (``{option: schema}``): the options that have it
    (all: none named) and each option's default where they differ."""
    found: dict[str, dict[str, tuple[str, str, str]]] = {}
    for option, schema in schemas.items():
        for key, default, text, allowed in schema_fields(schema, group):
            found.setdefault(key, {})[option] = (default, text, allowed)
    rows = []
    for key, per_option in found.items():
        defaults = {option: default for option, (default, _, _) in per_option.items()}
        if len(set(defaults.values())) == 1:
            default = next(iter(defaults.values()))
        else:
            default = "; ".join(f"{option}: {value}" for option, value in defaults.items())
        text, allowed = (_per_option({option: values[i] for option, values in per_option.items()})
                         for i in (1, 2))
        options = [] if len(per_option) == len(schemas) else list(per_option)
        rows.append(SettingRow(key, default, options, text, allowed))
    return rows


def _per_option(values: dict[str, str]) -> str:
    """One text where every option that states it agrees; else each option's own, named (a key several tasks share,
    e.g. ``task.data.generate.seed``, means something different in each)."""
    options_of: dict[str, list[str]] = {}
    for option, value in values.items():
        if value:
            options_of.setdefault(value, []).append(option)
    if len(options_of) <= 1:
        return next(iter(options_of), "")
    return " ".join(f"{', '.join(options)}: {value}" for value, options in options_of.items())


def plugin_schemas(group: str, conf_dir: Path | None = None) -> dict[str, type]:
    """``{option: schema}`` of a plug-in group's config files (``conf/<group>/*.yaml``): the ``<name>_schema`` a file
    starts from where one is registered (no task module is imported: ``--help`` stays fast), else its
    ``_target_`` class's ``config_class``."""
    import yaml
    from hydra.core.config_store import ConfigStore

    from ao_calib.plugins import PluginConfig, TaskConfig, plugin_class

    store = ConfigStore.instance()
    registered = set(store.list(group)) if group in store.repo else set()
    schemas = {}
    for path in sorted((conf_dir or CONF_DIR).joinpath(group).glob("*.yaml")):
        data = yaml.safe_load(path.read_text()) or {}
        base = next((f"{d}.yaml" for d in data.get("defaults", []) if isinstance(d, str)
                     and f"{d}.yaml" in registered), None)
        if base is not None:
            schemas[path.stem] = OmegaConf.get_type(store.load(f"{group}/{base}").node)
        else:
            cls = plugin_class(group, data.get("_target_"))
            schemas[path.stem] = getattr(cls, "config_class", None) or (TaskConfig if group == "task"
                                                                          else PluginConfig)
    return schemas


def registered_schemas(group: str | None = None) -> dict[str, type]:
    """``{option: schema}`` of the schemas stored in Hydra's ConfigStore for ``group`` (``<option>_schema``;
    ``ao_calib.config.register_schemas`` stores them), or ``{"config": Config}`` for the top level."""
    from hydra.core.config_store import ConfigStore

    store = ConfigStore.instance()
    if group:
        names = [n for n in store.list(group) if n.endswith(SCHEMA_SUFFIX + ".yaml")]
    else:
        names = ["config_schema.yaml"]
    found = {}
    for name in names:
        node = store.load(f"{group}/{name}" if group else name).node
        found[name.removesuffix(SCHEMA_SUFFIX + ".yaml").removesuffix("_warmup")] = OmegaConf.get_type(node)
    return found


def settings_sections() -> list[tuple[str, str, list[SettingRow]]]:
    """``(group, what it is, rows)`` for every group a run reads, in the order a user meets them, from the schemas
    registered in Hydra's ConfigStore (framework groups) and the classes the config files name (task, judge)."""
    from ao_calib.settings import nested_schema, type_hints

    top = registered_schemas()
    if not top:
        raise RuntimeError("no schemas registered: call ao_calib.config.register_schemas() first")
    fields = {name: nested_schema(hint) for name, hint in type_hints(top["config"]).items()}
    order = {"grpo": 0, "rloo": 1, "ppo": 2, "sft": 3}
    trainers = dict(sorted(registered_schemas("trainer").items(), key=lambda item: order.get(item[0], 9)))
    return [
        ("model", "the base model (model=<option>: a file of conf/model/)", group_rows("model",
                                                                                         {"": fields["model"]})),
        ("trainer", "the training stage (trainer=<option>)", group_rows("trainer", trainers)),
        ("warmup", "an SFT stage before the trainer (warmup=<option>; none by default)",
         group_rows("warmup", registered_schemas("warmup"))),
        ("task", "the task (task=<option>; its class's config_class)", group_rows("task", plugin_schemas("task"))),
        ("reward", "the reward mix (reward=<option>)", group_rows("reward", {"": fields["reward"]})),
        ("judge", "the judge (judge=<option>; its class's config_class)",
         group_rows("judge", plugin_schemas("judge"))),
        ("eval", "held-out evaluation", group_rows("eval", {"": fields["eval"]})),
        ("alerts", "failure-mode alerts of the online trainers", group_rows("alerts", {"": fields["alerts"]})),
        ("logger", "the logger (logger=<option>)", group_rows("logger", {"": fields["logger"]})),
        ("paths", "directories", group_rows("paths", {"": fields["paths"]})),
    ]


def settings_text(width: int = 118) -> str:
    """Every key with its default and help, for ``--help``."""
    lines = ["Every key, with its default, [the options of its group that have it], the values it allows and what it "
             "does\n(`--cfg job` prints this composition's values):"]
    for group, what, rows in settings_sections():
        lines += ["", f"  {group}.*: {what}"]
        for row in rows:
            options = f" [{', '.join(row.options)}]" if row.options else ""
            allowed = f"  (allowed {row.allowed})" if row.allowed else ""
            lines.append(f"    {row.key} = {row.default}{options}{allowed}")
            lines += textwrap.wrap(row.help or "(no help text yet)", width, initial_indent=" " * 8,
                                   subsequent_indent=" " * 8)
    return "\n".join(lines)


def settings_markdown() -> str:
    """README.md's settings table: the keys with help text (``--help`` lists every key)."""

    def cell(text: str) -> str:
        return text.replace("|", "\\|")

    lines = []
    for group, what, rows in settings_sections():
        lines += [f"`{group}.*`: {what}", "", "| key | default | allowed | options | what it does |",
                  "|---|---|---|---|---|"]
        lines += [f"| `{row.key}` | `{cell(row.default)}` | {cell(row.allowed) or '-'} | "
                  f"{', '.join(row.options) or 'all'} | {cell(row.help)} |" for row in rows if row.help]
        if any(not row.help for row in rows):
            lines += ["", "Keys without help text yet (the oracle's, `tasks/oracle/config.py`) are left out here; "
                      "`python -m ao_calib.run --help` lists them."]
        lines.append("")
    return "\n".join(lines).rstrip() + "\n"


@functools.lru_cache(maxsize=1)
def settings_help() -> str:
    """``settings_text`` escaped for the ``string.Template`` Hydra fills the help text with."""
    return settings_text().replace("$", "$$")


OmegaConf.register_new_resolver("ao_calib_settings", settings_help, replace=True)

