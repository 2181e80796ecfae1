"""Plug-in groups (``task``, ``judge``): the schema every plug-in's config starts from, the class a config names
by ``_target_``, and the schemas installed plug-in packages register.

A plug-in package may store its schemas in Hydra's ConfigStore through the entry point group
``ao_calib.config_schemas`` (a function that stores them), so that its config files start from them
(``defaults: [<name>_schema]``). Nothing happens at import: ``register_plugin_schemas`` is called once by each entry
point (through ``ao_calib.config.compose.register_schemas``) before Hydra composes, and a plug-in whose registration fails
stops the run with its own error.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

from omegaconf import MISSING

from ao_calib.core.errors import AOCalibError
from ao_calib.core.settings import Checked, setting

PLUGIN_GROUPS = ("task", "judge")
ENTRY_POINT_GROUP = "ao_calib.config_schemas"


class PluginError(AOCalibError):
    """An installed plug-in that cannot be loaded."""


@dataclass
class PluginConfig(Checked):
    """What every file of a plug-in group (``task``, ``judge``) sets: the class that implements it and the name
    runs are filed under. The class's ``config_class`` is the full schema; ``validate_plugins`` applies it."""

    _target_: Optional[str] = setting(None, "The class that implements it (null: none, e.g. judge=none).")
    name: str = setting(MISSING, "Name runs are filed under.")


@dataclass
class TaskConfig(PluginConfig):
    """Base schema of every task (``ao_calib.task_api.Task.config_class``)."""


def plugin_class(group: str, target: str | None):
    """The class a plug-in group's ``_target_`` names, or a config error naming the key."""
    if target is None:
        return None
    from hydra.utils import get_class

    try:
        return get_class(target)
    except Exception as exc:  # noqa: BLE001 -- ImportError, AttributeError or Hydra's wrapper of either
        cause = exc.__cause__ or exc
        raise AOCalibError(f"{group}._target_={target}: cannot import it ({type(cause).__name__}: {cause}). "
                           "Is its package installed or on PYTHONPATH?") from None


def register_plugin_schemas() -> list[str]:
    """Runs the schema registration of every installed plug-in package (entry point group
    ``ao_calib.config_schemas``) and returns their names. A plug-in that fails to load or to register raises
    ``PluginError`` with its own error, naming the entry point and its package: a broken plug-in stops the run."""
    from importlib.metadata import entry_points

    names = []
    for entry in entry_points(group=ENTRY_POINT_GROUP):
        package = entry.dist.name if entry.dist is not None else "?"
        try:
            entry.load()()
        except Exception as exc:  # noqa: BLE001 -- re-raised as the run's error, with the plug-in's own message
            raise PluginError(f"plug-in {entry.name} = {entry.value} (package {package}, entry point group "
                              f"{ENTRY_POINT_GROUP}) could not register its config schemas: "
                              f"{type(exc).__name__}: {exc}") from exc
        names.append(entry.name)
    return names
