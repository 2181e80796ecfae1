"""The run's config: the top-level schema over every component's own, composition with Hydra, cross-key checks and
``--help`` text."""

# Task and judge packages written against the single-module ao_calib.config import their base schemas from here.
from ao_calib.core.plugins import PluginConfig, TaskConfig  # noqa: F401
