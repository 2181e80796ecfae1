"""GRPO through TRL's GRPOTrainer: config mapping and a thin subclass that samples completions to disk."""

from __future__ import annotations

from pathlib import Path

from omegaconf import DictConfig
from trl import GRPOConfig, GRPOTrainer

from ao_calib.errors import AOCalibError
from ao_calib.trainers.common import CompletionSamplesMixin, divide, sampling_kwargs, training_kwargs


class AOGRPOTrainer(CompletionSamplesMixin, GRPOTrainer):
    """GRPOTrainer that records sampled completions and takes curriculum reward weights."""


def build_grpo_config(cfg: DictConfig, t: DictConfig, output_dir: Path, reward_weights: tuple[float, ...],
                      report_to_wandb: bool = False) -> GRPOConfig:
    completions_per_step = t.batch_size * t.num_generations
    micro = t.micro_batch_size or completions_per_step
    return GRPOConfig(
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
        loss_type=t.loss_type,
        scale_rewards=t.scale_rewards,
        use_vllm=t.use_vllm,
    )


def build_grpo_trainer(cfg, stage, model, tokenizer, data, schedule, reward_fns, run_dir: Path, *, callbacks,
                       report_to_wandb: bool = False, steering=None) -> AOGRPOTrainer:
    if steering is not None and stage.use_vllm:
        raise AOCalibError(f"trainer.use_vllm=true cannot run with task={cfg.task.name}: vLLM cannot run the "
                           "activation-steering hooks; set trainer.use_vllm=false")
    args = build_grpo_config(cfg, stage, run_dir / "checkpoints", schedule.weights_at(0), report_to_wandb)
    extra = {}
    if steering is not None:
        from ao_calib.trainers.steered_grpo import SteeredGRPOTrainer

        trainer_cls, extra = SteeredGRPOTrainer, {"steering": steering}
    else:
        trainer_cls = AOGRPOTrainer
    return trainer_cls(
        model=model,
        reward_funcs=[reward_fns[name] for name in schedule.names],
        args=args,
        train_dataset=data.train,
        processing_class=tokenizer,
        callbacks=callbacks,
        completions_path=run_dir / "completions.jsonl",
        completions_per_step=stage.completions_logged_per_step,
        **extra,
    )
