"""Trainer construction by stage config name; every trainer takes any task."""

from __future__ import annotations

import logging
from pathlib import Path

from omegaconf import DictConfig

from ao_calib.callbacks import MetricsFileCallback, RewardProgressCallback, RewardScheduleCallback
from ao_calib.errors import AOCalibError

log = logging.getLogger(__name__)


def build_trainer(cfg: DictConfig, stage: DictConfig, model, tokenizer, data, schedule, reward_fns, run_dir: Path, *,
                  steering=None, report_to_wandb: bool = False, stage_name: str = "train", extra_callbacks=()):
    """A TRL trainer for one stage (``cfg.trainer`` or ``cfg.warmup``), writing into ``run_dir``."""
    from transformers.trainer_callback import ProgressCallback

    from ao_calib.trainers.grpo import build_grpo_trainer
    from ao_calib.trainers.ppo import build_ppo_trainer
    from ao_calib.trainers.rloo import build_rloo_trainer
    from ao_calib.trainers.sft import build_sft_trainer

    builders = {"grpo": build_grpo_trainer, "ppo": build_ppo_trainer, "rloo": build_rloo_trainer,
                "sft": build_sft_trainer}
    if stage.name not in builders:
        raise AOCalibError(f"trainer={stage.name} is not available; choose one of {sorted(builders)}")
    metrics_file = MetricsFileCallback(run_dir / "metrics.jsonl", stage=stage_name)
    out_dir = run_dir if stage_name == "train" else run_dir / stage_name
    trainer = builders[stage.name](cfg, stage, model, tokenizer, data, schedule, reward_fns, out_dir,
                                   callbacks=[*extra_callbacks, metrics_file], report_to_wandb=report_to_wandb,
                                   steering=steering)
    trainer.remove_callback(ProgressCallback)
    trainer.add_callback(RewardProgressCallback(desc=stage_name))
    if schedule is not None and len(schedule.phases) > 1 and hasattr(trainer, "set_reward_weights"):
        trainer.add_callback(RewardScheduleCallback(schedule, trainer.set_reward_weights))
    trainer.metrics_file = metrics_file
    return trainer


def latest_checkpoint(setting: str | None, run_dir: Path) -> str | None:
    """``trainer.resume_from_checkpoint``: null, "latest" (newest checkpoint of this run directory), or a path."""
    if setting is None:
        return None
    if setting != "latest":
        if not Path(setting).is_dir():
            raise AOCalibError(f"trainer.resume_from_checkpoint={setting}: no such checkpoint directory")
        return setting
    checkpoints = sorted((run_dir / "checkpoints").glob("checkpoint-*"), key=lambda p: int(p.name.split("-")[-1]))
    if not checkpoints:
        log.warning("resume_from_checkpoint=latest: no checkpoint in %s yet, starting from scratch", run_dir)
        return None
    log.info("resuming from %s", checkpoints[-1])
    return str(checkpoints[-1])
