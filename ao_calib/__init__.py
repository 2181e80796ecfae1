"""ao_calib: Hydra-configured RL fine-tuning of LLMs (calibrated Activation Oracles, tool and function calling).

Importing the package registers nothing: each entry point that composes a config calls
``ao_calib.config.compose.register_schemas`` first (``python -m ao_calib.run``, ``compose_run_config``)."""
