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
    def build_data(self, tokenizer) -> TaskData: ...

    @abstractmethod
    def reward_functions(self) -> dict[str, RewardFn]:
        """All reward components this task offers, by the name configs use."""

    @abstractmethod
    def score(self, completion: str, row: dict) -> dict[str, float]:
        """Every reward component (and the headline metric) for one completion, for evaluation."""

    def reference_output(self, row: dict) -> str:
        """What a perfect completion looks like, shown beside mismatches."""
        return str(row.get("answer", ""))


_TASKS = {"function_call": "tasks.function_call.task:FunctionCallTask"}
_PLANNED = {
    "oracle": "the Activation Oracle issues (#3 core, #4 judge/eval)",
    "tool_json": "the JSON tool-calling issue (#5)",
}


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
