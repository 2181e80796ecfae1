"""The config schemas the shipped configs build on."""

from __future__ import annotations

import dataclasses

from hydra.core.config_store import ConfigStore
from omegaconf import OmegaConf

from ao_calib.config.help_text import registered_schemas
from ao_calib.core.settings import nested_schema, type_hints


def schemas_in_use() -> set[type]:
    """Every schema a shipped config builds on, nested ones included."""
    top = [*registered_schemas("model").values(), *registered_schemas("trainer").values(),
           *registered_schemas("warmup").values(), registered_schemas()["config"]]
    for group in ("task", "judge"):
        from ao_calib.config.help_text import plugin_schemas

        top += plugin_schemas(group).values()
    found: set[type] = set()

    def walk(schema):
        if schema in found:
            return
        found.add(schema)
        for hint in type_hints(schema).values():
            if (nested := nested_schema(hint)) is not None:
                walk(nested)

    for schema in top:
        walk(schema)
    return found


def every_registered_schema() -> set[type]:
    """Every schema in Hydra's ConfigStore and every plug-in's, nested ones included."""
    found = schemas_in_use()

    def stored(node):
        for value in node.values():
            if isinstance(value, dict):
                yield from stored(value)
            else:
                yield OmegaConf.get_type(value.node)

    todo = [t for t in stored(ConfigStore.instance().repo) if isinstance(t, type) and dataclasses.is_dataclass(t)]
    while todo:
        schema = todo.pop()
        if schema not in found:
            found.add(schema)
            todo += [n for hint in type_hints(schema).values() if (n := nested_schema(hint)) is not None]
    return found
