"""REINFORCE leave-one-out through TRL's RLOOTrainer, with the same completion samples and curricula as GRPO."""

from __future__ import annotations

from pathlib import Path

from omegaconf import DictConfig
from trl import RLOOConfig, RLOOTrainer

from ao_calib.errors import AOCalibError
from ao_calib.trainers.common import (CompletionSamplesMixin, build_online_trainer, group_kwargs, sampling_kwargs,
                                      training_kwargs)


class AORLOOTrainer(CompletionSamplesMixin, RLOOTrainer):
    """RLOOTrainer that records sampled completions and takes curriculum reward weights."""


def build_rloo_config(cfg: DictConfig, t: DictConfig, output_dir: Path, reward_weights: tuple[float, ...],
                      report_to_wandb: bool = False) -> RLOOConfig:
    return RLOOConfig(
        **training_kwargs(cfg, t, output_dir, report_to_wandb),
        **sampling_kwargs(cfg, t, reward_weights),
        **group_kwargs(t),
        normalize_advantages=t.normalize_advantages,
    )


def build_rloo_trainer(cfg, stage, model, tokenizer, data, schedule, reward_fns, run_dir: Path, *, callbacks,
                       report_to_wandb: bool = False, steering=None) -> AORLOOTrainer:
    if steering is not None:
        raise AOCalibError(f"trainer=rloo cannot inject activations (task={cfg.task.name}); use trainer=grpo or "
                           "trainer=ppo")
    args = build_rloo_config(cfg, stage, run_dir / "checkpoints", schedule.weights_at(0), report_to_wandb)
    return build_online_trainer(AORLOOTrainer, stage, args, model, tokenizer, data, schedule, reward_fns, run_dir,
                                callbacks)
