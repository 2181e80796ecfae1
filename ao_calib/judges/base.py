"""The judge interface: async and batched, one call per training step.

A judge is a plug-in: its config file (``conf/judge/<name>.yaml``, here or in any package on Hydra's search path)
names the class by ``_target_``, and the class names its schema by ``config_class``.
"""

from __future__ import annotations

import asyncio
import threading
from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar

from ao_calib.core.plugins import PluginConfig


_background_loop: asyncio.AbstractEventLoop | None = None
_background_lock = threading.Lock()


def judge_now(judge: Judge, items: Sequence[JudgeItem]) -> list[float | None]:
    """``judge.score(items)`` from synchronous code (evaluation, a warm-up), on one event loop that lives in a
    background thread for the whole process, as TRL runs async reward functions: clients that keep tasks on
    their loop (litellm's logging worker) are never torn down between calls."""
    global _background_loop
    with _background_lock:
        if _background_loop is None:
            _background_loop = asyncio.new_event_loop()
            threading.Thread(target=_background_loop.run_forever, name="judge-loop", daemon=True).start()
    return asyncio.run_coroutine_threadsafe(judge.score(items), _background_loop).result()


@dataclass(frozen=True)
class JudgeItem:
    """What a judge sees: the full target prompt, the question, the oracle's answer, and a known label if any."""

    prompt: str
    question: str
    answer: str
    label: str | None = None


@dataclass
class JudgeStats:
    calls: int = 0
    failures: int = 0
    cache_hits: int = 0
    extra: dict = field(default_factory=dict)


@dataclass
class JudgeContext:
    """What a run offers a judge besides its own config: the base model and tokenizer (for judges that grade
    with it), the chat-template settings, and the task's grading prompt."""

    model: Any = None
    tokenizer: Any = None
    chat_template_kwargs: dict = field(default_factory=dict)
    default_prompt: str | None = None


def to_settings(cfg) -> Any:
    """A judge's validated config node as its schema dataclass (interpolations resolved)."""
    from omegaconf import OmegaConf

    return OmegaConf.to_object(cfg) if OmegaConf.is_config(cfg) else cfg


_last_failure: dict[str, str] = {}


def note_failure(judge: str, error: str) -> None:
    """Records why a judgment failed last (the judge's description, the error's kind), for the outage alert."""
    _last_failure.update(judge=judge, error=error)


def last_failure() -> tuple[str, str] | None:
    """``(judge, error)`` of the last failed judgment in this process, or None."""
    return (_last_failure["judge"], _last_failure["error"]) if _last_failure else None


class Judge(ABC):
    #: the schema of ``cfg.judge`` for this judge; every default of its settings is stated there
    config_class: ClassVar[type] = PluginConfig

    def __init__(self):
        self.stats = JudgeStats()
        self._popped = (0, 0)  # stats.calls and stats.failures at the last pop_step_stats

    @classmethod
    def from_config(cls, cfg, context: JudgeContext) -> Judge:
        """The judge for ``cfg`` (``cfg.judge``, typed by ``config_class``). A judge without settings needs no
        override; one that has them reads them here."""
        return cls()

    def pop_step_stats(self) -> dict[str, float]:
        """Counters since the last call, logged once per training step (``judge/...``): items judged and items
        masked (a step with every item masked raises the judge-outage alert)."""
        calls, failures = self.stats.calls, self.stats.failures
        step = {"judge/items": float(calls - self._popped[0]), "judge/masked": float(failures - self._popped[1])}
        self._popped = (calls, failures)
        return step

    def totals(self) -> dict[str, float]:
        """Counters over the judge's lifetime, for summary.json."""
        return {"judge/calls": float(self.stats.calls), "judge/failures": float(self.stats.failures)}

    @abstractmethod
    async def score(self, items: Sequence[JudgeItem]) -> list[float | None]:
        """Informativeness in [0, 1] per item, or None where no judgment could be made (the sample is masked)."""
