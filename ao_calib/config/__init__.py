"""The run's config: schemas, composition with Hydra, cross-key checks, ``--help`` text and the commands' own options."""

# Task and judge packages written against the single-module ao_calib.config import their base schemas from here.
from ao_calib.config.plugins import PluginConfig, TaskConfig  # noqa: F401
