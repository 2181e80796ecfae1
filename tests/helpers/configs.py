"""The shipped config groups' options, and a config composed as a run composes it."""

from __future__ import annotations

from hydra import compose, initialize_config_dir

from ao_calib.config.compose import validate_plugins
from tests.helpers.paths import CONF_DIR


def options(group: str) -> list[str]:
    return sorted(p.stem for p in (CONF_DIR / group).glob("*.yaml"))


def composed(overrides: list[str]):
    """The config a run sees: composed, then its plug-in groups (task, judge) typed by their classes' schemas."""
    with initialize_config_dir(config_dir=str(CONF_DIR), version_base="1.3"):
        cfg = compose("config", overrides=overrides, return_hydra_config=True)
    validate_plugins(cfg)
    return cfg
