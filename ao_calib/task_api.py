"""The task abstraction: what the runner needs from a task, and the registry of tasks by name."""

from __future__ import annotations

import importlib
from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from omegaconf import DictConfig

from ao_calib.errors import NotImplementedYetError

RewardFn = Callable[..., list[float | None]]


@dataclass
class TaskData:
    """Train and held-out splits. Rows carry ``prompt`` (chat messages) and the columns reward functions read."""

    train: Any  # datasets.Dataset
    test: Any  # datasets.Dataset


class Task(ABC):
    """One training task: data, rewards and how a completion is scored for evaluation."""

    name: str
    #: key of the per-sample score that counts as "correct" in evaluation (e.g. exact match)
    headline_metric: str

    def __init__(self, cfg: DictConfig):
        self.cfg = cfg

    def pretrained_adapter(self) -> str | None:
        """A pretrained adapter the task starts from (hub id or path), if any."""
        return None

    @abstractmethod
    def build_data(self, tokenizer, model) -> TaskData:
        """Train/test rows; ``model`` is there for tasks that need the base model's activations."""

    def steering(self):
        """An ``ao_calib.oracle_steering.ActivationSteering`` when the task injects activations, else None."""
        return None

    def summary(self) -> dict:
        """Task totals for summary.json (e.g. the judge's calls, failures and cost)."""
        return {}

    def training_callbacks(self, trainer_name: str) -> list:
        """Task-specific trainer callbacks for a stage (e.g. the oracle's failure-mode alerts during GRPO)."""
        return []

    def eval_variants(self) -> list[str]:
        """Extra evaluation passes besides the plain one (e.g. a control with other prompts' activations)."""
        return []

    def extra_evaluations(self, model, tokenizer, generate, out_dir, tag: str) -> dict:
        """Further benchmarks run with every evaluation; ``generate(rows)`` returns greedy completions with the
        task's steering. Returns a JSON-able dict stored in eval.json under its keys."""
        return {}

    def aggregate(self, records: list[dict], out_dir, tag: str) -> dict[str, float]:
        """Metrics over all evaluated samples; by default the mean of every per-sample score."""
        keys = sorted({k for r in records for k in r["scores"]})
        metrics = {k: sum(r["scores"][k] for r in records) / max(len(records), 1) for k in keys}
        metrics["accuracy"] = metrics.get(self.headline_metric, 0.0)
        return metrics

    @abstractmethod
    def reward_functions(self) -> dict[str, RewardFn]:
        """All reward components this task offers, by the name configs use."""

    @abstractmethod
    def score(self, completion: str, row: dict) -> dict[str, float]:
        """Every reward component (and the headline metric) for one completion, for evaluation."""

    def reference_output(self, row: dict) -> str:
        """What a perfect completion looks like, shown beside mismatches."""
        return str(row.get("answer", ""))


_TASKS = {
    "function_call": "tasks.function_call.task:FunctionCallTask",
    "oracle": "tasks.oracle.task:OracleTask",
    "tool_json": "tasks.tool_json.task:ToolJsonTask",
}
_PLANNED: dict[str, str] = {}


def get_task(cfg: DictConfig) -> Task:
    name = cfg.task.name
    if name in _PLANNED:
        raise NotImplementedYetError(
            f"task={name} is not implemented yet (tracked in {_PLANNED[name]}). "
            f"Available now: {', '.join(sorted(_TASKS))}. Try: python -m ao_calib.run experiment=quickstart"
        )
    if name not in _TASKS:
        raise NotImplementedYetError(f"unknown task {name!r}; available: {', '.join(sorted(_TASKS))}")
    module, cls = _TASKS[name].split(":")
    return getattr(importlib.import_module(module), cls)(cfg)
