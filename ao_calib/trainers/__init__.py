"""Trainers, one module each (``grpo``, ``rloo``, ``ppo``, ``sft``), built from a stage config by the function its
``_target_`` names. Each builder has the ``TrainerBuilder`` signature; steering (``steering``), the shared
TrainingArguments and completion samples (``common``), callbacks and alerts are composed in, never imported
from one trainer into another. Their settings (``config``) are one schema per trainer."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Protocol

from ao_calib.core.errors import AOCalibError

if TYPE_CHECKING:
    from ao_calib.trainers.common import TrainerSetup
    from ao_calib.trainers.config import TrainerConfig

log = logging.getLogger(__name__)

__all__ = ["TrainerBuilder", "TrainerSetup", "build_trainer"]


def __getattr__(name: str):
    # TrainerSetup is imported on first use: the package's settings (ao_calib.trainers.config) are read while a
    # config composes, which must not pull in torch.
    if name == "TrainerSetup":
        from ao_calib.trainers.common import TrainerSetup

        return TrainerSetup
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


class TrainerBuilder(Protocol):
    def __call__(self, setup: TrainerSetup, stage: TrainerConfig, stage_name: str, callbacks: list):
        """A transformers ``Trainer`` for one stage (the typed ``trainer`` or ``warmup`` settings) writing into
        ``setup.run_dir.stage_dir(stage_name)``."""


def build_trainer(setup: TrainerSetup, stage: TrainerConfig, stage_name: str = "train", extra_callbacks=(),
                  metrics_file=None):
    """The stage's trainer, with the metrics file (``metrics_file``, a ``MetricsFileCallback``; a new one when
    None), progress bar and reward curriculum attached."""
    from hydra.utils import get_method
    from transformers.trainer_callback import ProgressCallback

    from ao_calib.trainers.callbacks import (
        MetricsFileCallback,
        ProcessLayoutCallback,
        RewardProgressCallback,
        RewardScheduleCallback,
    )
    from ao_calib.trainers.lm_head import apply_lm_head

    try:
        builder: TrainerBuilder = get_method(stage._target_)
    except Exception as exc:  # noqa: BLE001 -- Hydra wraps the ImportError
        raise AOCalibError(f"trainer {stage.name}: cannot import its builder {stage._target_} ({exc})") from None
    metrics_file = metrics_file or MetricsFileCallback(setup.run_dir.metrics, stage=stage_name)
    trainer = builder(setup, stage, stage_name, [*extra_callbacks, metrics_file])
    head = apply_lm_head(trainer, stage.lm_head)
    log.info("%s: the training passes score tokens with the %s LM head (%s.lm_head)", stage_name, head,
             "warmup" if stage_name == "warmup" else "trainer")
    trainer.remove_callback(ProgressCallback)
    trainer.add_callback(RewardProgressCallback(desc=stage_name))
    trainer.add_callback(ProcessLayoutCallback(trainer.accelerator))
    schedule = setup.schedule
    if schedule is not None and len(schedule.phases) > 1 and hasattr(trainer, "set_reward_weights"):
        trainer.add_callback(RewardScheduleCallback(schedule, trainer.set_reward_weights))
    return trainer
