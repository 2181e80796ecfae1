"""GRPO through TRL's GRPOTrainer: config mapping and a thin subclass that samples completions to disk."""

from __future__ import annotations

from pathlib import Path

from omegaconf import DictConfig
from trl import GRPOConfig, GRPOTrainer

from ao_calib.errors import AOCalibError
from ao_calib.trainers.common import (CompletionSamplesMixin, build_online_trainer, group_kwargs, sampling_kwargs,
                                      training_kwargs)


class AOGRPOTrainer(CompletionSamplesMixin, GRPOTrainer):
    """GRPOTrainer that records sampled completions and takes curriculum reward weights."""


def build_grpo_config(cfg: DictConfig, t: DictConfig, output_dir: Path, reward_weights: tuple[float, ...],
                      report_to_wandb: bool = False) -> GRPOConfig:
    return GRPOConfig(
        **training_kwargs(cfg, t, output_dir, report_to_wandb),
        **sampling_kwargs(cfg, t, reward_weights),
        **group_kwargs(t),
        loss_type=t.loss_type,
        scale_rewards=t.scale_rewards,
    )


def build_grpo_trainer(cfg, stage, model, tokenizer, data, schedule, reward_fns, run_dir: Path, *, callbacks,
                       report_to_wandb: bool = False, steering=None) -> AOGRPOTrainer:
    if steering is not None and stage.use_vllm:
        raise AOCalibError(f"trainer.use_vllm=true cannot run with task={cfg.task.name}: vLLM cannot run the "
                           "activation-steering hooks; set trainer.use_vllm=false")
    args = build_grpo_config(cfg, stage, run_dir / "checkpoints", schedule.weights_at(0), report_to_wandb)
    if steering is None:
        return build_online_trainer(AOGRPOTrainer, stage, args, model, tokenizer, data, schedule, reward_fns, run_dir,
                                    callbacks)
    from ao_calib.trainers.steered_grpo import SteeredGRPOTrainer

    return build_online_trainer(SteeredGRPOTrainer, stage, args, model, tokenizer, data, schedule, reward_fns,
                                run_dir, callbacks, steering=steering)
