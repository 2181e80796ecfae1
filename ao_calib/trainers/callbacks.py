"""Trainer callbacks shared by every trainer: metrics file, progress bar, reward curriculum."""

from __future__ import annotations

import json
import logging
import math
from collections.abc import Callable
from pathlib import Path

from tqdm.auto import tqdm
from transformers import TrainerCallback

from ao_calib.rewards import RewardSchedule
from ao_calib.runtime import distributed

log = logging.getLogger(__name__)


def _jsonable(value):
    if hasattr(value, "item"):
        value = value.item()
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


class MetricsFileCallback(TrainerCallback):
    """Appends every logged dict (all TRL metrics, each reward component) to ``metrics.jsonl``, one line a step."""

    def __init__(self, path: str | Path, stage: str = "train"):
        self.path = Path(path)
        self.stage = stage
        self.last: dict = {}

    @classmethod
    def of(cls, trainer) -> MetricsFileCallback:
        """The metrics file a trainer built by ``ao_calib.trainers.build_trainer`` writes (its last row: ``last``)."""
        return next(cb for cb in trainer.callback_handler.callbacks if isinstance(cb, cls))

    def on_log(self, args, state, control, logs=None, **kwargs):
        if not state.is_world_process_zero or not logs:
            return
        record = {"step": state.global_step, "stage": self.stage, **{k: _jsonable(v) for k, v in logs.items()}}
        self.last.update(record)
        with self.path.open("a") as f:
            f.write(json.dumps(record) + "\n")


class ProcessLayoutCallback(TrainerCallback):
    """Says once per stage how training is spread over processes, as the trainer's accelerator set it up: the
    strategy (NO, MULTI_CPU, MULTI_GPU, FSDP, DEEPSPEED), the process count and how the model is held."""

    def __init__(self, accelerator):
        self.accelerator = accelerator

    def on_train_begin(self, args, state, control, model=None, **kwargs):
        from torch.distributed.fsdp import FSDPModule

        # FSDP2 shards in place: the trainer's own model's layers become FSDPModules.
        sharded = model is not None and any(isinstance(m, FSDPModule) for m in model.modules())
        log.info("training on %d process(es), %s%s", self.accelerator.num_processes,
                 self.accelerator.distributed_type.value, ", parameters sharded by FSDP2" if sharded else "")


class RewardProgressCallback(TrainerCallback):
    """A progress bar whose postfix shows the latest reward, loss and KL instead of printing every log dict."""

    SHOWN = (("reward", "reward"), ("loss", "loss"), ("kl", "kl"))

    def __init__(self, desc: str = "train"):
        self.bar = None
        self.desc = desc

    def on_train_begin(self, args, state, control, **kwargs):
        if state.is_world_process_zero:
            self.bar = tqdm(total=state.max_steps, initial=state.global_step, desc=self.desc, dynamic_ncols=True)

    def on_step_end(self, args, state, control, **kwargs):
        if self.bar is not None:
            self.bar.update(state.global_step - self.bar.n)

    def on_log(self, args, state, control, logs=None, **kwargs):
        if self.bar is not None and logs:
            shown = {label: f"{logs[key]:.3g}" for key, label in self.SHOWN if isinstance(logs.get(key), float)}
            if shown:
                self.bar.set_postfix(shown, refresh=False)

    def on_train_end(self, args, state, control, **kwargs):
        if self.bar is not None:
            self.bar.close()
            self.bar = None


class RewardScheduleCallback(TrainerCallback):
    """Switches reward weights between curriculum phases at step boundaries."""

    def __init__(self, schedule: RewardSchedule, set_weights: Callable[[tuple[float, ...]], None]):
        self.schedule = schedule
        self.set_weights = set_weights
        self.phase: int | None = None

    def on_step_begin(self, args, state, control, **kwargs):
        phase = self.schedule.phase_index(state.global_step)
        if phase != self.phase:
            weights = self.schedule.weights_at(state.global_step)
            self.set_weights(weights)
            if self.phase is not None:
                log.info("step %d: reward phase %d, weights %s", state.global_step, phase,
                         dict(zip(self.schedule.names, weights)))
            self.phase = phase


class PeriodicEvalCallback(TrainerCallback):
    """Held-out evaluation every ``every`` optimiser steps (the learning curve on held-out rows); its metrics are
    logged as ``val/<name>`` through the trainer, so they reach metrics.jsonl and wandb alike.
    ``on_result(step, tag, metrics, trainer)``: called after each (the candidates of checkpoint selection,
    ``ao_calib.evaluation.selection``)."""

    def __init__(self, evaluate_fn: Callable[[str], dict], every: int, trainer,
                 on_result: Callable[[int, str, dict, object], None] | None = None):
        self.evaluate_fn = evaluate_fn
        self.every = every
        self.trainer = trainer  # added to it once it exists (``trainer.add_callback``); logs through trainer.log
        self.on_result = on_result

    def on_step_end(self, args, state, control, **kwargs):
        if self.every and state.global_step % self.every == 0 and state.global_step < state.max_steps:
            tag = f"step{state.global_step}"
            metrics = self.evaluate_fn(tag)
            pending_train_log = control.should_log  # logging resets the flag; the step's own log must still run
            self.trainer.log(validation_row(metrics))
            control.should_log = self.trainer.control.should_log = pending_train_log
            if self.on_result is not None:
                self.on_result(state.global_step, tag, metrics, self.trainer)


def validation_row(metrics: dict) -> dict:
    """An evaluation's figures as metrics.jsonl's ``val/<name>`` columns."""
    return {f"val/{k}": v for k, v in metrics.items() if isinstance(v, (int, float))}


class StopOnSignalCallback(TrainerCallback):
    """When a stop signal came during training (``ao_calib.runtime.interrupts.SignalWatch``), saves a checkpoint at the
    end of the current step and stops there, so the run resumes from that step."""

    def __init__(self, watch):
        self.watch = watch

    def on_step_end(self, args, state, control, **kwargs):
        if distributed.is_distributed():
            # A signal reaches the processes at different moments: all stop at the same step (the checkpoint is
            # saved by all of them together), as soon as any one has it. Every process asks at every step.
            self.watch.received = next((r for r in distributed.all_gather(self.watch.received) if r), None)
        if self.watch.received is not None:
            control.should_save = True
            control.should_training_stop = True
