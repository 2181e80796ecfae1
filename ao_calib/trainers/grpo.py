"""GRPO through TRL's GRPOTrainer: config mapping and a thin subclass that samples completions to disk."""

from __future__ import annotations

from trl import GRPOConfig

from ao_calib.trainers.base import AOGRPOTrainer
from ao_calib.trainers.common import TrainerSetup, build_online_trainer, group_kwargs, sampling_kwargs, training_kwargs
from ao_calib.trainers.config import GRPOTrainerConfig
from ao_calib.trainers.steering import SteeringMixin


class SteeredGRPOTrainer(SteeringMixin, AOGRPOTrainer):
    """AOGRPOTrainer that injects each row's activations in every pass."""


def build_grpo_config(setup: TrainerSetup, t: GRPOTrainerConfig, stage_name: str = "train") -> GRPOConfig:
    return GRPOConfig(
        **training_kwargs(setup, t, stage_name),
        **sampling_kwargs(setup, t),
        **group_kwargs(setup, t),
        loss_type=t.loss_type,
        scale_rewards=t.scale_rewards,
    )


def build_grpo_trainer(setup: TrainerSetup, stage: GRPOTrainerConfig, stage_name: str,
                     callbacks: list) -> AOGRPOTrainer:
    args = build_grpo_config(setup, stage, stage_name)
    if setup.steering is None:
        return build_online_trainer(AOGRPOTrainer, setup, stage, args, callbacks, shared_prefix=stage.shared_prefix,
                                    greedy_member=stage.greedy_member)
    return build_online_trainer(SteeredGRPOTrainer, setup, stage, args, callbacks, steering=setup.steering,
                                greedy_member=stage.greedy_member)
