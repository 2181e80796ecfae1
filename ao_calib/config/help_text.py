"""What ``python -m ao_calib.run --help`` lists: every config group with the options a user can pick.

Hydra's own list would also offer the typed schemas that config files build on (``model_schema``,
``grpo_schema``, ...): they live in the same ConfigStore groups so that ``defaults: [<name>_schema]`` works, but
picking one (``model=model_schema``) composes an empty model. The help template in ``conf/hydra/default.yaml``
calls ``${ao_calib_groups:}`` instead, which leaves them out. ``--help <group>`` and ``--help <key>``
(``topic_help``) print one group's keys or one key, from the schemas' field metadata.
"""

from __future__ import annotations

import dataclasses
import sys
import textwrap
from pathlib import Path

from omegaconf import OmegaConf

from ao_calib.core.command_names import command
from ao_calib.core.settings import shown_default, shown_value
from ao_calib.core.shipped import shipped_dir
from ao_calib.core.spelling import closest

CONF_DIR = shipped_dir("conf")  # the installed package's copy, else the clone's

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
        options = user_options(loader.get_group_options(group, results_filter=ObjectType.CONFIG))
        if options:
            groups[group] = options
    return groups


def user_options(names) -> list[str]:
    """The options of a group a user can pick: Hydra's, less the ``*_schema`` entries config files build on."""
    return [name for name in names if not name.endswith(SCHEMA_SUFFIX)]


def groups_text() -> str:
    """One line per group, escaped for the ``string.Template`` Hydra fills the help text with."""
    return "\n".join(f"  {group}: {', '.join(options)}" for group, options in selectable_groups().items()
                     ).replace("$", "$$")


OmegaConf.register_new_resolver("ao_calib_groups", groups_text, replace=True)


# --------------------------------------------------------------------------------------------- settings
# Every key a run reads, with its default and help, generated from the schemas' field metadata
# (ao_calib.core.settings): ``--help <group>`` and ``--help <key>`` print it as text, and docs/reference/settings.md is
# ``python -m ao_calib.config.settings_doc --output docs/reference/settings.md``, so neither can drift from the code.



@dataclasses.dataclass
class SettingRow:
    key: str
    default: str
    options: list[str]  # the options of the group that have the key; empty: all of them
    help: str
    allowed: str = ""  # the values it allows, where it limits them


def _allowed(schema: type, field: dataclasses.Field) -> str:
    from ao_calib.core.settings import ALLOWED, is_optional, type_hints

    rule = field.metadata.get(ALLOWED)
    if rule is None:
        return ""
    return rule.describe() + (" or null" if is_optional(type_hints(schema)[field.name]) and not rule.choices else "")


def schema_fields(schema: type, prefix: str) -> list[tuple[str, str, str, str]]:
    """``(key, default, help, allowed)`` of every leaf of ``schema`` (nested schemas walked; an optional nested one
    is also listed itself, since null is a choice)."""
    from ao_calib.core.settings import help_of, is_optional, nested_schema, type_hints

    rows = []
    hints = type_hints(schema)
    for field in dataclasses.fields(schema):
        key = f"{prefix}.{field.name}"
        nested = nested_schema(hints[field.name])
        if nested is None or is_optional(hints[field.name]):
            rows.append((key, shown_default(field), help_of(schema, field.name), _allowed(schema, field)))
        if nested is not None:
            rows += schema_fields(nested, key)
    return rows


def group_rows(group: str, schemas: dict[str, type], set_by: dict[str, dict] | None = None) -> list[SettingRow]:
    """One row per key of ``group`` over its options' schemas (``{option: schema}``): the options that have it
    (all: none named) and each option's default where they differ. ``set_by``: ``{option: the keys its config file
    sets}`` (``option_settings``); such a value is that option's default, so the table shows what the option
    composes to."""
    found: dict[str, dict[str, tuple[str, str, str]]] = {}
    for option, schema in schemas.items():
        for key, default, text, allowed in option_fields(schema, group, (set_by or {}).get(option, {})):
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


_UNSET = object()


def option_fields(schema: type, group: str, settings: dict) -> list[tuple[str, str, str, str]]:
    """``schema_fields`` of one option whose config file sets ``settings`` (its own keys, nested): a value the file
    sets replaces the schema's default, and the keys below a nested schema the option leaves null are not its
    keys."""
    rows, null_parents = [], []
    for key, default, text, allowed in schema_fields(schema, group):
        if any(key.startswith(parent + ".") for parent in null_parents):
            continue
        value = _setting(settings, key.removeprefix(group + "."))
        if value is not _UNSET:
            default = "{...}" if isinstance(value, dict) and nested_row(schema, key, group) else shown_value(value)
        if default == "null":
            null_parents.append(key)
        rows.append((key, default, text, allowed))
    return rows


def nested_row(schema: type, key: str, group: str) -> bool:
    """Whether ``key`` (a row of ``schema_fields``) is a nested schema listed itself (an optional one)."""
    from ao_calib.core.settings import nested_schema, type_hints

    for name in key.removeprefix(group + ".").split("."):
        schema = nested_schema(type_hints(schema)[name])
        if schema is None:
            return False
    return True


def _setting(settings: dict, dotted: str):
    node = settings
    for part in dotted.split("."):
        if not isinstance(node, dict) or part not in node:
            return _UNSET
        node = node[part]
    return node


def option_settings(group: str, conf_dir: Path | None = None) -> dict[str, dict]:
    """``{option: the keys conf/<group>/<option>.yaml sets}``: its own, over those of another option of the group
    that its defaults list names (``reward=function_call`` is ``function_call_balanced``)."""
    folder = (conf_dir or CONF_DIR).joinpath(group)
    return {path.stem: _file_settings(folder, path.stem) for path in sorted(folder.glob("*.yaml"))}


def _file_settings(folder: Path, option: str) -> dict:
    import yaml

    data = yaml.safe_load(folder.joinpath(f"{option}.yaml").read_text()) or {}
    found: dict = {}
    for entry in data.get("defaults", []):
        if isinstance(entry, str) and folder.joinpath(f"{entry}.yaml").is_file():
            found = _merged(found, _file_settings(folder, entry))
    return _merged(found, {key: value for key, value in data.items() if key != "defaults"})


def _merged(base: dict, over: dict) -> dict:
    merged = dict(base)
    for key, value in over.items():
        both = isinstance(value, dict) and isinstance(merged.get(key), dict)
        merged[key] = _merged(merged[key], value) if both else value
    return merged


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

    from ao_calib.core.plugins import PluginConfig, TaskConfig, plugin_class

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
    ``ao_calib.config.compose.register_schemas`` stores them), or ``{"config": Config}`` for the top level."""
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
    from ao_calib.core.settings import nested_schema, type_hints

    top = registered_schemas()
    if not top:
        raise RuntimeError("no schemas registered: call ao_calib.config.compose.register_schemas() first")
    fields = {name: nested_schema(hint) for name, hint in type_hints(top["config"]).items()}
    order = {"grpo": 0, "rloo": 1, "ppo": 2, "sft": 3}
    trainers = dict(sorted(registered_schemas("trainer").items(), key=lambda item: order.get(item[0], 9)))
    def per_option(group: str, schemas: dict[str, type] | None = None) -> list[SettingRow]:
        """The rows of a group whose options are config files: each option's own values (``option_settings``)."""
        settings = option_settings(group)
        schemas = schemas or {option: fields[group] for option in settings}
        return group_rows(group, schemas, settings)

    return [
        ("model", "the base model (model=<option>: a file of conf/model/)", per_option("model")),
        ("trainer", "the training stage (trainer=<option>)", per_option("trainer", trainers)),
        ("warmup", "an SFT stage before the trainer (warmup=<option>; none by default)",
         per_option("warmup", registered_schemas("warmup"))),
        ("task", "the task (task=<option>; its class's config_class)", per_option("task", plugin_schemas("task"))),
        ("reward", "the reward mix (reward=<option>)", per_option("reward")),
        ("judge", "the judge (judge=<option>; its class's config_class)",
         per_option("judge", plugin_schemas("judge"))),
        ("eval", "held-out evaluation", group_rows("eval", {"": fields["eval"]})),
        ("alerts", "failure-mode alerts of the online trainers", group_rows("alerts", {"": fields["alerts"]})),
        ("search", "what a run returns to an optimising sweep (hparams_search=<option>)",
         group_rows("search", {"": fields["search"]})),
        ("logger", "the logger (logger=<option>)", per_option("logger")),
        ("paths", "directories", per_option("paths")),
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


SETTINGS_PAGE_HEAD = """# Settings reference

<!-- generated by `python -m ao_calib.config.settings_doc --output docs/reference/settings.md`; do not edit by hand -->

Every key a run reads, by group, with its default, the values it allows, the options of its group that have it
and what it does. `python -m ao_calib.run --help <group>` or `--help <key>` prints the same from the command line;
`python -m ao_calib.run <overrides> --cfg job` prints a composition's values.

"""


def settings_page() -> str:
    """The docs site's settings page (docs/reference/settings.md): a heading, then ``settings_markdown``."""
    return SETTINGS_PAGE_HEAD + settings_markdown()


def settings_markdown() -> str:
    """The settings tables: the keys with help text (``--help <group>`` lists every key)."""

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


# --------------------------------------------------------------------------------------------- --help <topic>
# ``--help`` alone is Hydra's (the template in conf/hydra/default.yaml: examples and groups). ``--help <key>`` or
# ``--help <group>`` is answered here, before Hydra composes: Hydra would read the word as a malformed override.

HELP_FLAGS = ("--help", "-h")
WIDTH = 110


def help_topic(argv: list[str]) -> str | None:
    """The word after ``--help``/``-h`` when it names a key or group (not an override, not a flag), else None."""
    for flag, word in zip(argv, argv[1:]):
        if flag in HELP_FLAGS and "=" not in word and not word.startswith("-"):
            return word
    return None


def _conf_options(group: str) -> list[str]:
    return sorted(path.stem for path in CONF_DIR.joinpath(group).glob("*.yaml"))


def _row_lines(row: SettingRow, indent: str = "    ") -> list[str]:
    options = f" [{', '.join(row.options)}]" if row.options else ""
    allowed = f"  (allowed {row.allowed})" if row.allowed else ""
    return [f"{indent}{row.key} = {row.default}{options}{allowed}",
            *textwrap.wrap(row.help or "(no help text yet)", WIDTH, initial_indent=indent + "    ",
                           subsequent_indent=indent + "    ")]


def key_text(row: SettingRow, group: str) -> str:
    """One key: its default, the values it allows, the options of its group that have it, and its help."""
    options = row.options or _conf_options(group)
    lines = [row.key, f"  default: {row.default}"]
    if row.allowed:
        lines.append(f"  allowed: {row.allowed}")
    if options:
        lines.append(f"  options: {', '.join(options)} (the {group} options that have it)")
    lines += textwrap.wrap(row.help or "(no help text yet)", WIDTH, initial_indent="  ", subsequent_indent="  ")
    return "\n".join(lines)


def group_text(group: str, what: str, rows: list[SettingRow]) -> str:
    """A group's keys, each with its default and help."""
    options = _conf_options(group)
    lines = [f"{group}.*: {what}" + (f"; options: {', '.join(options)}" if options else ""), ""]
    for row in rows:
        lines += _row_lines(row, "  ")
    lines += ["", f"`--help {group}.<key>` shows one key; `--cfg job` prints the composed values."]
    return "\n".join(lines)


def _summary(path: Path, width: int = 88) -> str:
    """The first sentence of a config file's opening comment (past Hydra's ``@package`` line), shortened to
    ``width``: what the option is."""
    words = []
    for line in path.read_text().splitlines():
        if not line.startswith("#"):
            break
        if not line.startswith("# @package"):
            words += line.lstrip("#").split()
    sentence = " ".join(words).split(". ", 1)[0].split(": ", 1)[0].rstrip(".")
    return textwrap.shorten(sentence, width, placeholder=" ...")


def options_text(group: str) -> str:
    """A group without settings of its own (experiment, recipe, hparams_search): the options to pick."""
    options = _conf_options(group)
    width = max(map(len, options), default=0)
    return "\n".join([f"{group}: pick one with {group}=<option> (conf/{group}/<option>.yaml; docs/presets.md "
                       "explains each)",
                       *(f"  {option:<{width}}  {_summary(CONF_DIR / group / f'{option}.yaml')}".rstrip()
                         for option in options)])


def topic_help(topic: str) -> tuple[str, int]:
    """``(text, exit status)`` for ``--help <topic>``: a key, a group, the keys under a prefix, or an error
    naming the closest keys."""
    sections = settings_sections()
    for group, what, rows in sections:
        if topic == group:
            return group_text(group, what, rows), 0
    for group, what, rows in sections:
        exact = next((row for row in rows if row.key == topic), None)
        below = [row for row in rows if row.key.startswith(topic + ".")]
        if exact is not None:
            text = key_text(exact, group)
            if below:
                text += "\n\nKeys under it:\n" + "\n".join(f"  {row.key} = {row.default}" for row in below)
            return text, 0
        if below:
            return group_text(topic, f"keys under {topic} ({what})", below), 0
    plain_groups = [g for g in sorted(p.name for p in CONF_DIR.iterdir() if p.is_dir())
                    if g not in NOT_GROUPS and g not in {s[0] for s in sections}]
    if topic in plain_groups:
        return options_text(topic), 0
    keys = [row.key for _, _, rows in sections for row in rows]
    names = [s[0] for s in sections] + plain_groups + keys
    close = closest(topic, keys, names)
    hint = f" Did you mean: {', '.join(close)}?" if close else ""
    return (f"error: no setting or group named {topic!r}.{hint} (`{command('run')} --help` lists the "
            "groups; `--help <group>` lists a group's keys)"), 2


def print_topic_help(topic: str) -> int:
    text, status = topic_help(topic)
    print(text, file=sys.stderr if status else sys.stdout, flush=True)
    return status
