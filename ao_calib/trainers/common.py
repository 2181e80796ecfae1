"""What every trainer shares: what it is built from (``TrainerSetup``), the TrainingArguments fields the stage
config sets, the sampling fields of the online-RL trainers (GRPO, RLOO, PPO), the mixin that keeps sampled
completions in the run's completions file and logs the advantage spread, and checkpoints that are either whole or
absent (written under a temporary name, renamed when complete; checked before a resume); and the final hidden
states of a pass, read by a hook on the backbone (PPO's critic, the SFT calibration term)."""

from __future__ import annotations

import json
import logging
import os
import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Self

import torch

from ao_calib.core.errors import AOCalibError
from ao_calib.rewards import RewardFn, RewardSchedule
from ao_calib.runs.run_dir import RunDir
from ao_calib.runtime import distributed
from ao_calib.trainers.config import OnlineTrainerConfig, TrainerConfig

log = logging.getLogger(__name__)


@dataclass
class TrainerSetup:
    """Everything a run's trainers are built from besides each stage's own settings; the same for every stage of
    the run. Of the run's config a trainer sees only the model's settings and the run's seed."""

    model_config: Any  # ao_calib.models.config.ModelConfig: dtype, chat template options, the micro-batch cap
    model: Any
    tokenizer: Any
    data: Any  # ao_calib.task_api.TaskData
    run_dir: RunDir
    schedule: RewardSchedule | None = None  # the reward mix (None for SFT-only runs)
    reward_fns: dict[str, RewardFn] = field(default_factory=dict)
    report_to_wandb: bool = False
    seed: int = TrainerConfig.seed  # trainer.seed, the run's one seed (a warm-up's row draws)

    @property
    def steering(self):
        """The task's steering (an ao_calib.steering.Steering) when it injects activations, else None."""
        return getattr(self.data, "steering", None)

    def reward_funcs(self) -> list[RewardFn]:
        """The mix's functions in the schedule's order (the order of the weight vector)."""
        return [self.reward_fns[name] for name in self.schedule.names]


def peft_base(model):
    """The transformers model under a PEFT wrapper (the model itself when it has none): its ``base_model`` is the
    backbone and ``get_output_embeddings()`` the LM head."""
    return model.get_base_model() if hasattr(model, "get_base_model") else model


class BackboneStates:
    """A forward hook on a backbone, for a ``with`` block: ``outputs`` keeps the final hidden states of every call
    in order (a chunked pass calls it once a chunk), so TRL's fused loss, which returns no hidden states or logits,
    needs no second pass."""

    def __init__(self, backbone: torch.nn.Module):
        self.backbone, self.outputs = backbone, []

    def __enter__(self) -> Self:
        def keep(module, args, output):
            self.outputs.append(output.last_hidden_state if hasattr(output, "last_hidden_state") else output[0])

        self.handle = self.backbone.register_forward_hook(keep)
        return self

    def __exit__(self, *exc):
        self.handle.remove()


def uses_bf16(model_config) -> bool:
    """Every stage's ``TrainingArguments.bf16``: bfloat16 mixed precision on GPUs when the model (``model``'s
    settings) is bfloat16."""
    return torch.cuda.is_available() and model_config.dtype == "bfloat16"


def training_kwargs(setup: TrainerSetup, stage: TrainerConfig, stage_name: str) -> dict:
    """TrainingArguments fields every trainer takes from a stage config (``cfg.trainer`` or ``cfg.warmup``)."""
    on_gpu = torch.cuda.is_available()
    return dict(
        output_dir=str(setup.run_dir.checkpoints(stage_name)),
        learning_rate=stage.lr,
        max_steps=stage.max_steps,
        lr_scheduler_type=stage.lr_scheduler_type,
        warmup_steps=stage.warmup_steps,
        weight_decay=stage.weight_decay,
        max_grad_norm=stage.max_grad_norm,
        logging_steps=stage.logging_steps,
        save_steps=stage.save_steps,
        save_total_limit=stage.save_total_limit,
        seed=stage.seed,
        gradient_checkpointing=setup.model_config.gradient_checkpointing,
        bf16=uses_bf16(setup.model_config),
        use_cpu=not on_gpu,
        report_to=["wandb"] if setup.report_to_wandb else "none",
        dataloader_num_workers=0,
        # Every trained parameter (LoRA, PPO's value head) gets a gradient in every step. With the default search
        # for unused ones, DDP would mark the value head, applied outside the wrapped forward, ready twice.
        ddp_find_unused_parameters=False,
    )


def sampling_kwargs(setup: TrainerSetup, stage: TrainerConfig) -> dict:
    """Generation and reward fields shared by TRL's online trainers."""
    return dict(
        max_completion_length=stage.max_completion_length,
        temperature=stage.temperature,
        top_p=stage.top_p,
        shuffle_dataset=stage.shuffle_dataset,
        reward_weights=list(setup.schedule.weights_at(0)),
        chat_template_kwargs=dict(setup.model_config.chat_template_kwargs) or None,
        log_completions=False,
    )


def group_kwargs(setup: TrainerSetup, stage: TrainerConfig) -> dict:
    """Fields of TRL's group-baseline trainers (GRPO, RLOO): a step is ``batch_size`` prompts times
    ``num_generations`` completions over all processes, in forward passes of ``micro_batch_size``."""
    micro, accumulation = stage_batches(setup.model_config, stage)
    return dict(
        per_device_train_batch_size=micro,
        gradient_accumulation_steps=accumulation,
        num_generations=stage.num_generations,
        beta=stage.beta,
        epsilon=stage.epsilon,
        epsilon_high=stage.epsilon_high if stage.epsilon_high is not None else stage.epsilon,
        num_iterations=stage.num_iterations,
        use_vllm=stage.use_vllm,
    )


def build_online_trainer(trainer_cls, setup: TrainerSetup, stage: TrainerConfig, args, callbacks, **extra):
    """An online trainer on the task's training split with the reward mix's functions, sampling completions to
    the run's completions file."""
    from ao_calib.tools import episodes_in_training

    if episodes_in_training(setup.data) and not {"tools", "rollout_func"} & extra.keys():
        raise AOCalibError(f"trainer={stage.name} samples single-turn completions, and the task gives tools "
                           "(multi-turn rollouts): use trainer=grpo")
    return trainer_cls(
        model=setup.model,
        reward_funcs=setup.reward_funcs(),
        args=args,
        train_dataset=setup.data.train,
        processing_class=setup.tokenizer,
        callbacks=callbacks,
        completions_path=setup.run_dir.completions,
        completions_per_step=stage.completions_logged_per_step,
        **generation_kwargs(stage),
        **extra,
    )


def generation_kwargs(stage: OnlineTrainerConfig) -> dict:
    """The rollout settings ``FastGenerationMixin`` takes, from an online stage's config."""
    return {key: getattr(stage, key) for key in ("fast_generation", "generation_merged_copy",
                                                 "fast_generation_cache_shapes", "fast_generation_stop_check_every")}


def step_examples(stage: TrainerConfig) -> tuple[int, str]:
    """The examples in one optimiser step of a stage, over all processes, and how its config names that number:
    PPO's mini-batch of rollouts, GRPO's and RLOO's prompts times their completions, SFT's batch."""
    if getattr(stage, "num_mini_batches", None):
        return (divide(stage.batch_size, stage.num_mini_batches, "num_mini_batches and batch_size"),
                "batch_size/num_mini_batches")
    if getattr(stage, "num_generations", None):
        return stage.batch_size * stage.num_generations, "batch_size*num_generations"
    return stage.batch_size, "batch_size"


def stage_batches(model_config, stage: TrainerConfig, key: str | None = None) -> tuple[int, int]:
    """(per-device batch, gradient accumulation steps) of a stage: its own ``micro_batch_size``, or where that is
    null the model's ``max_micro_batch_size`` cap (``model_config``: the model's settings; see ``per_process``)."""
    return per_process(stage, stage.micro_batch_size, key,
                       cap=getattr(model_config, "max_micro_batch_size", None))


def per_process(stage: TrainerConfig, micro: int | None, key: str | None = None, cap: int | None = None
                ) -> tuple[int, int]:
    """(per-device batch, gradient accumulation steps) for a stage's optimiser step (``step_examples``) over all
    processes: the config's batch sizes are global, so a run on 2 GPUs takes the same steps as on one. A
    ``micro`` batch larger than a process's share is cut to the share. Without a ``micro`` batch the whole share
    is one pass, or with a ``cap`` (the model's ``max_micro_batch_size``) the largest divisor of the share that is
    at most the cap: a cap the user never typed must not refuse a batch it does not divide. ``key`` names the
    stage in errors."""
    total, what = step_examples(stage)
    what = f"{key}.{what}" if key else what
    world = distributed.world_size()
    local = divide(total, world, f"{what} over the {world} processes") if world > 1 else total
    if not micro and cap:
        micro = max(d for d in range(1, min(cap, local) + 1) if local % d == 0)
    micro = min(micro or local, local)
    return micro, divide(local, micro, f"micro_batch_size and {what}" + (
        f" per process ({total}/{world})" if world > 1 else ""))


def check_process_split(cfg) -> None:
    """At start-up, before any model loads (``cfg``: the composed config): every stage's optimiser step splits
    evenly over the processes (the same split the trainers' builders make)."""
    if not distributed.is_distributed():
        return
    for key in ("warmup", "trainer"):
        stage = cfg.get(key)
        if stage is not None:
            stage_batches(cfg.model, stage, key)


def divide(total: int, part: int, what: str) -> int:
    """``total // part``, or a config error naming both when ``part`` does not divide ``total``."""
    if part <= 0 or total % part:
        raise AOCalibError(f"{what}: {part} must divide {total}")
    return total // part


# ------------------------------------------------------------------------------------------- checkpoints

STAGING = ".partial"  # a checkpoint is written under checkpoints/.partial/ and renamed into place when complete


class AtomicCheckpointMixin:
    """For every trainer: a checkpoint is written into ``checkpoints/.partial/checkpoint-N`` and renamed to
    ``checkpoints/checkpoint-N`` only once everything in it is on disk, so a kill or a full disk mid-save leaves
    no checkpoint that looks whole. Goes first in a trainer's bases, so TRL's own additions land in the staging
    folder too."""

    _staging_root: str | None = None

    def _get_output_dir(self, trial):
        return self._staging_root or super()._get_output_dir(trial)

    def _save_checkpoint(self, model, trial):
        final_root = Path(super()._get_output_dir(trial))
        name = f"checkpoint-{self.state.global_step}"
        staging = final_root / STAGING
        if self.args.should_save:
            shutil.rmtree(staging, ignore_errors=True)  # what a killed save left behind
        # Every process writes into the staging folder (its RNG state at least): the main one clears it before
        # and renames it after all of them are done.
        self.accelerator.wait_for_everyone()
        self._staging_root = str(staging)
        try:
            super()._save_checkpoint(model, trial)
        finally:
            self._staging_root = None
        self.accelerator.wait_for_everyone()
        if self.args.should_save:
            target = final_root / name
            if target.exists():  # the same step saved again (a resumed run's first save): replace it whole
                shutil.rmtree(target)
            os.replace(staging / name, target)
            shutil.rmtree(staging, ignore_errors=True)
            _rotate(final_root, self.args.save_total_limit)


def _rotate(root: Path, limit: int | None) -> None:
    """Keeps the newest ``limit`` complete checkpoints (the trainer's own rotation saw only the staging folder)."""
    if not limit:
        return
    found = sorted((p for p in root.glob("checkpoint-*") if p.name.split("-")[-1].isdigit()),
                   key=lambda p: int(p.name.split("-")[-1]))
    for old in found[:-limit]:
        shutil.rmtree(old, ignore_errors=True)


class CompletionSamplesMixin(AtomicCheckpointMixin):
    """For TRL's online trainers: keeps a few completions of every generation batch, with each reward component
    and the advantage, in the completions file; logs the advantage spread (``advantage_std``, the one place it is
    computed: every group scored alike means no learning signal); lets reward weights change during training
    (curricula); and offers ``_after_scoring`` to subclasses that post-process a scored batch (PPO's critic and
    GAE)."""

    def __init__(self, *args, completions_path: str | Path | None = None, completions_per_step: int = 4, **kwargs):
        super().__init__(*args, **kwargs)
        self.completions_path = Path(completions_path) if completions_path else None
        self.completions_per_step = completions_per_step
        self._pending_samples: list[dict] = []

    def set_reward_weights(self, weights) -> None:
        self.reward_weights = torch.tensor(list(weights), dtype=torch.float32)

    def _generate_and_score_completions(self, inputs):
        output = super()._generate_and_score_completions(inputs)
        if self.model.training:
            output = self._after_scoring(output)
            self._metrics["train"]["advantage_std"].append(output["advantages"].float().std().item())
            if self.completions_path is not None and self.accelerator.is_main_process:
                self._keep_samples(output)
        return output

    def _after_scoring(self, output: dict) -> dict:
        return output

    def _sample_advantages(self, output: dict) -> list[float]:
        """One advantage per local row, as recorded in completions.jsonl."""
        return output["advantages"].float().tolist()

    def _keep_samples(self, output: dict) -> None:
        # TRL's _logs deques hold this generation batch's prompts, completions and rewards in order, this process's
        # rows first.
        n = min(self.completions_per_step, len(self._logs["completion"]))
        rewards = {name: list(values)[:n] for name, values in self._logs["rewards"].items()}
        prompts, completions = list(self._logs["prompt"])[:n], list(self._logs["completion"])[:n]
        advantages = self._sample_advantages(output)[:n]
        for i in range(n):
            self._pending_samples.append(
                {
                    "step": self.state.global_step,
                    "prompt": prompts[i],
                    "completion": completions[i],
                    "rewards": {name: values[i] for name, values in rewards.items()},
                    "advantage": advantages[i] if i < len(advantages) else None,
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
