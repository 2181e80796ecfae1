"""A run too short to learn: the command line cut a training stage to a small fraction of the steps its preset
trains for (the README's smoke run: ``warmup.max_steps=20`` of the quickstart's 1,500). Its figures then show that
the pipeline runs, not what training teaches (an accuracy of 0, a nan AUROC). The preset's steps are the ones the
same command line composes without its ``max_steps`` overrides, so a preset's own length never fires the alert,
however short (``experiment=function_call_tiny``). Said at start-up, and kept as the alert ``too_short_to_learn``
in summary.json and the closing block."""

from __future__ import annotations

import logging

from omegaconf import DictConfig

from ao_calib.config.checks import run_stages
from ao_calib.runtime import distributed

log = logging.getLogger(__name__)

ALERT = "too_short_to_learn"
STAGE_KEYS = {"train": "trainer"}  # a stage's config key where it is not the stage's name (the warm-up's is)


def _sets_steps(override: str) -> bool:
    """Whether a command-line override sets a stage's length (``trainer.max_steps=2``, ``+warmup.max_steps=20``)."""
    return override.lstrip("+~").split("=", 1)[0].rsplit(".", 1)[-1] == "max_steps"


def preset_config() -> DictConfig | None:
    """The config this run's command line composes without its max_steps overrides; None where it has none (the run
    trains its preset's own steps) or where no Hydra app runs (a run started from code)."""
    from hydra import compose
    from hydra.core.global_hydra import GlobalHydra
    from hydra.core.hydra_config import HydraConfig

    if not HydraConfig.initialized() or not GlobalHydra.instance().is_initialized():
        return None
    hydra_cfg = HydraConfig.get()
    overrides = list(hydra_cfg.overrides.task)
    kept = [o for o in overrides if not _sets_steps(o)]
    return None if kept == overrides else compose(hydra_cfg.job.config_name, overrides=kept)


def short_stages(cfg: DictConfig, preset: DictConfig, fraction: float) -> list[tuple[str, int, int]]:
    """(config key, the run's steps, the preset's) of each stage set to under ``fraction`` of its preset's steps."""
    preset_steps = {name: node.get("max_steps") for name, node in run_stages(preset)}
    found = []
    for name, node in run_stages(cfg):
        steps, preset_count = node.get("max_steps"), preset_steps.get(name)
        if isinstance(steps, int) and isinstance(preset_count, int) and steps < fraction * preset_count:
            found.append((STAGE_KEYS.get(name, name), steps, preset_count))
    return found


def short_run_alert(cfg: DictConfig) -> dict[str, dict]:
    """``{too_short_to_learn: {step, message}}`` when a stage is set to under ``alerts.short_run_fraction`` of its
    preset's steps, printed by the main process; ``{}`` otherwise."""
    fraction = cfg.alerts.short_run_fraction
    if not fraction:
        return {}
    try:
        preset = preset_config()
    except Exception as exc:  # noqa: BLE001 -- advice only: a composition it cannot repeat never stops the run
        log.info("too_short_to_learn not checked: the preset's steps could not be composed (%s)", exc)
        return {}
    short = short_stages(cfg, preset, fraction) if preset is not None else []
    if not short:
        return {}
    stages = ", ".join(f"{key}.max_steps={steps} of the preset's {preset_steps}" for key, steps, preset_steps in short)
    message = (f"the training stages are too short to learn anything ({stages}; under alerts.short_run_fraction="
               f"{fraction} of each): this run checks that the pipeline runs, and its evaluation figures (often an "
               "accuracy of 0 and a nan AUROC) say nothing about what the preset teaches. For a run that "
               f"learns, drop {' '.join(f'{key}.max_steps={steps}' for key, steps, _ in short)}")
    log.warning(message)
    if distributed.is_main():
        print(f"[short run] {message}", flush=True)
    return {ALERT: {"step": 0, "message": message, "stages": {key: [steps, preset_steps]
                                                              for key, steps, preset_steps in short}}}
