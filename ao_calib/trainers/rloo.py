"""REINFORCE leave-one-out through TRL's RLOOTrainer, with the same completion samples and curricula as GRPO."""

from __future__ import annotations

from pathlib import Path

from omegaconf import DictConfig
from trl import RLOOConfig, RLOOTrainer

from ao_calib.errors import AOCalibError
from ao_calib.trainers.common import CompletionSamplesMixin, divide, sampling_kwargs, training_kwargs


class AORLOOTrainer(CompletionSamplesMixin, RLOOTrainer):
    """RLOOTrainer that records sampled completions and takes curriculum reward weights."""


def build_rloo_config(cfg: DictConfig, t: DictConfig, output_dir: Path, reward_weights: tuple[float, ...],
                      report_to_wandb: bool = False) -> RLOOConfig:
    completions_per_step = t.batch_size * t.num_generations
    micro = t.micro_batch_size or completions_per_step
    return RLOOConfig(
        **training_kwargs(cfg, t, output_dir, report_to_wandb),
        **sampling_kwargs(cfg, t, reward_weights),
        per_device_train_batch_size=micro,
        gradient_accumulation_steps=divide(completions_per_step, micro,
                                           "trainer.micro_batch_size and batch_size*num_generations"),
        num_generations=t.num_generations,
        beta=t.beta,
        epsilon=t.epsilon,
        epsilon_high=t.epsilon_high if t.epsilon_high is not None else t.epsilon,
        num_iterations=t.num_iterations,
        normalize_advantages=t.normalize_advantages,
        use_vllm=t.use_vllm,
    )


def build_rloo_trainer(cfg, stage, model, tokenizer, data, schedule, reward_fns, run_dir: Path, *, callbacks,
                       report_to_wandb: bool = False, steering=None) -> AORLOOTrainer:
    if steering is not None:
        raise AOCalibError(f"trainer=rloo cannot inject activations (task={cfg.task.name}); use trainer=grpo or "
                           "trainer=ppo")
    return AORLOOTrainer(
        model=model,
        reward_funcs=[reward_fns[name] for name in schedule.names],
        args=build_rloo_config(cfg, stage, run_dir / "checkpoints", schedule.weights_at(0), report_to_wandb),
        train_dataset=data.train,
        processing_class=tokenizer,
        callbacks=callbacks,
        completions_path=run_dir / "completions.jsonl",
        completions_per_step=stage.completions_logged_per_step,
    )
