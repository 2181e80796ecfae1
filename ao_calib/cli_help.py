"""What ``python -m ao_calib.run --help`` lists: every config group with the options a user can pick.

Hydra's own list would also offer the typed schemas that config files build on (``model_schema``,
``grpo_schema``, ...): they live in the same ConfigStore groups so that ``defaults: [<name>_schema]`` works, but
picking one (``model=model_schema``) composes an empty model. The help template in ``conf/hydra/default.yaml``
calls ``${ao_calib_groups:}`` instead, which leaves them out.
"""

from __future__ import annotations

from omegaconf import OmegaConf

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
