"""One home per setting: a config field states its default, its help text and the values it allows, in the
field itself (TRL's style: ``metadata={"help": ...}``)::

    beta: float = setting(0.1, "KL coefficient against the reference.", allowed=at_least(0))

What reads that metadata: ``Checked.__post_init__`` (a schema built in code refuses a value out of range), the
start-up check of the composed config (``check_tree``, naming the full key before any model loads), ``--help``
and the settings reference page (``ao_calib.config.help_text``). This module imports nothing heavy.
"""

from __future__ import annotations

import copy
import dataclasses
import functools
import typing
from dataclasses import dataclass
from enum import Enum
from typing import Any

from ao_calib.core.errors import AOCalibError

HELP = "help"
ALLOWED = "allowed"


@dataclass(frozen=True)
class Allowed:
    """The values a field allows: a numeric range (ends ``low``/``high``, open or closed) or a set of choices.
    ``None`` passes wherever the field's type is Optional."""

    low: float | None = None
    high: float | None = None
    low_open: bool = False
    high_open: bool = False
    choices: tuple = ()

    def allows(self, value: Any) -> bool:
        if isinstance(value, Enum):
            value = value.value
        if self.choices:
            return value in self.choices
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            return False
        if self.low is not None and not (value > self.low if self.low_open else value >= self.low):
            return False
        return self.high is None or (value < self.high if self.high_open else value <= self.high)

    def describe(self) -> str:
        if self.choices:
            return "one of " + ", ".join(str(c) for c in self.choices)
        if self.high is None:
            return f"{'>' if self.low_open else '>='} {self.low}"
        return f"{'(' if self.low_open else '['}{self.low}, {self.high}{')' if self.high_open else ']'}"


def at_least(n: float) -> Allowed:
    return Allowed(low=n)


def above(n: float) -> Allowed:
    return Allowed(low=n, low_open=True)


def within(low: float, high: float, low_open: bool = False, high_open: bool = False) -> Allowed:
    return Allowed(low=low, high=high, low_open=low_open, high_open=high_open)


def one_of(*choices) -> Allowed:
    return Allowed(choices=tuple(choices))


_NO_DEFAULT = dataclasses.MISSING


def setting(default: Any = _NO_DEFAULT, help: str = "", *, allowed: Allowed | None = None,  # noqa: A002
            factory: Any = _NO_DEFAULT) -> Any:
    """A dataclass field with its default (a list or dict is copied per instance; ``factory`` builds a nested
    schema), its help text and the values it allows."""
    metadata: dict[str, Any] = {HELP: " ".join(help.split())}
    if allowed is not None:
        metadata[ALLOWED] = allowed
    if isinstance(default, (list, dict)):
        default, factory = _NO_DEFAULT, functools.partial(copy.deepcopy, default)
    return dataclasses.field(default=default, default_factory=factory, metadata=metadata)


class SettingError(AOCalibError, ValueError):
    """A value out of its field's allowed range (a user's error: the CLI prints it as one line); ``key`` is the
    field's dotted path as far as it is known."""

    def __init__(self, key: str, value: Any, allowed: Allowed, nullable: bool):
        self.key, self.value = key, value
        shown = value.value if isinstance(value, Enum) else value
        if allowed.choices:
            text = f"{key}={shown}: not allowed, choose {allowed.describe()}"
        else:
            text = f"{key}={shown}: out of range, allowed {allowed.describe()}"
        super().__init__(text + (" or null" if nullable and not allowed.choices else ""))


@functools.lru_cache(maxsize=None)
def type_hints(schema: type) -> dict[str, Any]:
    return typing.get_type_hints(schema)


def is_optional(hint: Any) -> bool:
    return hint is Any or type(None) in typing.get_args(hint)


def nested_schema(hint: Any) -> type | None:
    """The dataclass a field's type names (``Optional[X]`` included), else None."""
    candidates = [hint, *typing.get_args(hint)] if typing.get_origin(hint) is typing.Union else [hint]
    return next((c for c in candidates if isinstance(c, type) and dataclasses.is_dataclass(c)), None)


def check_value(key: str, value: Any, field: dataclasses.Field, schema: type) -> None:
    allowed = field.metadata.get(ALLOWED)
    if allowed is None:
        return
    nullable = is_optional(type_hints(schema)[field.name])
    if value is None and nullable:
        return
    if value is None or not allowed.allows(value):
        raise SettingError(key, value, allowed, nullable)


class Checked:
    """Mixed into a schema: building it (in code, or from the composed config by ``OmegaConf.to_object``) checks
    every field against its ``allowed`` values. A subclass with its own ``__post_init__`` calls this one first.
    (Built from the composed config, ``check_tree`` has already checked every value, naming its full key.)"""

    config_key = ""  # where the schema sits in the run's config (e.g. "judge"), for the messages of one built in code

    def __post_init__(self) -> None:
        prefix = f"{self.config_key}." if self.config_key else ""
        for field in dataclasses.fields(self):
            check_value(prefix + field.name, getattr(self, field.name), field, type(self))


def default_of(schema: type, name: str) -> Any:
    """A field's default, for code that takes the same value as a keyword argument (one home: the schema)."""
    field = schema.__dataclass_fields__[name]
    return field.default if field.default_factory is dataclasses.MISSING else field.default_factory()


def help_of(schema: type, name: str) -> str:
    """A field's help text; a subclass that only changes a default inherits its parent's."""
    for cls in schema.__mro__:
        found = getattr(cls, "__dataclass_fields__", {}).get(name)
        if found is not None and found.metadata.get(HELP):
            return found.metadata[HELP]
    return ""


REQUIRED = "(required)"  # how help pages show a key with no default


def shown_value(value: Any) -> str:
    """A value as the help pages print it: YAML's null/true/false, enums by value, lists without quotes."""
    if isinstance(value, Enum):
        value = value.value
    if value is None:
        return "null"
    if isinstance(value, bool):
        return str(value).lower()
    if value == "???":
        return REQUIRED
    if isinstance(value, str):
        return value.replace("\n", "\\n") if value else '""'
    return str(value).replace("'", "")


def shown_default(field: dataclasses.Field) -> str:
    """A dataclass field's default as the help pages print it (``REQUIRED`` where it has none)."""
    if field.default is not dataclasses.MISSING:
        return shown_value(field.default)
    if field.default_factory is not dataclasses.MISSING:
        return shown_value(field.default_factory())
    return REQUIRED


def check_tree(node: Any, path: str) -> None:
    """Every typed field under ``node`` (an OmegaConf node at ``path``) against its allowed values: the first value
    out of range raises ``SettingError`` naming its full key. A value that cannot be resolved is skipped (it is
    reported where it is used, with its own message)."""
    from omegaconf import DictConfig, ListConfig, OmegaConf
    from omegaconf.errors import OmegaConfBaseException

    if isinstance(node, ListConfig) and not node._is_none() and not node._is_missing():
        for i in range(len(node)):
            child = node._get_node(i)
            if isinstance(child, (DictConfig, ListConfig)):
                check_tree(child, f"{path}.{i}")
        return
    if not isinstance(node, DictConfig) or node._is_none() or node._is_missing() or node._is_interpolation():
        return
    schema = OmegaConf.get_type(node)
    if not (isinstance(schema, type) and dataclasses.is_dataclass(schema)):
        return
    for field in dataclasses.fields(schema):
        if field.name not in node:
            continue
        key = f"{path}.{field.name}" if path else field.name
        child = node._get_node(field.name)
        if isinstance(child, (DictConfig, ListConfig)):
            check_tree(child, key)
            continue
        try:
            value = node[field.name]
        except OmegaConfBaseException:
            continue
        check_value(key, value, field, schema)


def plain(value: Any) -> Any:
    """A config value as plain Python data: a typed settings object (a dataclass) or an OmegaConf node becomes
    dicts and lists (interpolations resolved); anything else is returned as it is. Code that takes a component's
    settings accepts either form through it."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return dataclasses.asdict(value)
    from omegaconf import OmegaConf

    return OmegaConf.to_container(value, resolve=True) if OmegaConf.is_config(value) else value
