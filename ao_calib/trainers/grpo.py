"""GRPO through TRL's GRPOTrainer: config mapping and a thin subclass that samples completions to disk."""

from __future__ import annotations

import json
from pathlib import Path

import torch
from omegaconf import DictConfig, OmegaConf
from trl import GRPOConfig, GRPOTrainer

from ao_calib.errors import AOCalibError


class AOGRPOTrainer(GRPOTrainer):
    """GRPOTrainer that keeps a few completions of every generation batch, with each reward component and the
    advantage, in ``completions.jsonl``; and whose reward weights can change during training (curricula)."""

    def __init__(self, *args, completions_path: str | Path | None = None, completions_per_step: int = 4, **kwargs):
        super().__init__(*args, **kwargs)
        self.completions_path = Path(completions_path) if completions_path else None
        self.completions_per_step = completions_per_step
        self._pending_samples: list[dict] = []

    def set_reward_weights(self, weights) -> None:
        self.reward_weights = torch.tensor(list(weights), dtype=torch.float32)

    def _generate_and_score_completions(self, inputs):
        output = super()._generate_and_score_completions(inputs)
        if self.completions_path is not None and self.model.training and self.accelerator.is_main_process:
            self._keep_samples()
        return output

    def _keep_samples(self) -> None:
        # TRL's _logs deques hold this generation batch's prompts, completions, rewards and advantages in order.
        n = min(self.completions_per_step, len(self._logs["completion"]))
        rewards = {name: list(values)[:n] for name, values in self._logs["rewards"].items()}
        prompts, completions = list(self._logs["prompt"])[:n], list(self._logs["completion"])[:n]
        advantages = list(self._logs["advantages"])[:n]
        for i in range(n):
            self._pending_samples.append(
                {
                    "step": self.state.global_step,
                    "prompt": prompts[i],
                    "completion": completions[i],
                    "rewards": {name: values[i] for name, values in rewards.items()},
                    "advantage": advantages[i],
                }
            )

    def log(self, logs: dict[str, float], start_time: float | None = None) -> None:
        if self.model.training:
            # The weights in force, so a curriculum's phase switches are visible in metrics.jsonl.
            logs.update({f"reward_weight/{n}": round(w, 6)
                         for n, w in zip(self.reward_func_names, self.reward_weights.tolist())})
        super().log(logs, start_time)
        if self._pending_samples and self.completions_path is not None:
            with self.completions_path.open("a") as f:
                for sample in self._pending_samples:
                    f.write(json.dumps(sample, default=str) + "\n")
            self._pending_samples.clear()


def build_grpo_config(cfg: DictConfig, t: DictConfig, output_dir: Path, reward_weights: tuple[float, ...],
                      report_to_wandb: bool = False) -> GRPOConfig:
    completions_per_step = t.batch_size * t.num_generations
    micro = t.micro_batch_size or completions_per_step
    if completions_per_step % micro:
        raise AOCalibError(
            f"trainer.micro_batch_size={micro} must divide batch_size*num_generations={completions_per_step}"
        )
    on_gpu = torch.cuda.is_available()
    return GRPOConfig(
        output_dir=str(output_dir),
        per_device_train_batch_size=micro,
        gradient_accumulation_steps=completions_per_step // micro,
        num_generations=t.num_generations,
        learning_rate=t.lr,
        max_steps=t.max_steps,
        lr_scheduler_type=t.lr_scheduler_type,
        warmup_steps=t.warmup_steps,
        weight_decay=t.weight_decay,
        max_grad_norm=t.max_grad_norm,
        logging_steps=t.logging_steps,
        save_steps=t.save_steps,
        save_total_limit=t.save_total_limit,
        seed=t.seed,
        max_completion_length=t.max_completion_length,
        temperature=t.temperature,
        top_p=t.top_p,
        beta=t.beta,
        epsilon=t.epsilon,
        epsilon_high=t.epsilon_high if t.epsilon_high is not None else t.epsilon,
        num_iterations=t.num_iterations,
        loss_type=t.loss_type,
        scale_rewards=t.scale_rewards,
        shuffle_dataset=t.shuffle_dataset,
        use_vllm=t.use_vllm,
        reward_weights=list(reward_weights),
        chat_template_kwargs=OmegaConf.to_container(cfg.model.chat_template_kwargs, resolve=True) or None,
        gradient_checkpointing=cfg.model.gradient_checkpointing,
        bf16=on_gpu and cfg.model.dtype == "bfloat16",
        use_cpu=not on_gpu,
        report_to=["wandb"] if report_to_wandb else "none",
        log_completions=False,
        dataloader_num_workers=0,
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
