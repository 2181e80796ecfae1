"""ao_calib: Hydra-configured RL fine-tuning of LLMs (calibrated Activation Oracles, tool and function calling)."""

# Importing the package registers the framework's structured config schemas (and the shipped judges'), so any
# Hydra compose (the CLI, tests, benchmarks, notebooks) validates against them.
from ao_calib import config as _config  # noqa: F401
from ao_calib.judges import config as _judge_config  # noqa: F401
