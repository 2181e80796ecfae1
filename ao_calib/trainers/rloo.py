"""REINFORCE leave-one-out through TRL's RLOOTrainer, with the same completion samples and curricula as GRPO."""

from __future__ import annotations

from trl import RLOOConfig, RLOOTrainer

from ao_calib.core.errors import AOCalibError
from ao_calib.models.fast_generation import FastGenerationMixin
from ao_calib.trainers.common import (CompletionSamplesMixin, TrainerSetup, build_online_trainer, group_kwargs,
                                      sampling_kwargs, training_kwargs)
from ao_calib.trainers.config import RLOOTrainerConfig


class AORLOOTrainer(CompletionSamplesMixin, FastGenerationMixin, RLOOTrainer):
    """RLOOTrainer that records sampled completions and takes curriculum reward weights."""


def build_rloo_config(setup: TrainerSetup, t: RLOOTrainerConfig, stage_name: str = "train") -> RLOOConfig:
    return RLOOConfig(
        **training_kwargs(setup, t, stage_name),
        **sampling_kwargs(setup, t),
        **group_kwargs(setup, t),
        normalize_advantages=t.normalize_advantages,
    )


def build_rloo_trainer(setup: TrainerSetup, stage: RLOOTrainerConfig, stage_name: str,
                     callbacks: list) -> AORLOOTrainer:
    if setup.steering is not None:
        raise AOCalibError("trainer=rloo cannot inject activations (this task's data carries a steering); use "
                           "trainer=grpo or trainer=ppo")
    return build_online_trainer(AORLOOTrainer, setup, stage, build_rloo_config(setup, stage, stage_name), callbacks,
                                greedy_member=stage.greedy_member)
