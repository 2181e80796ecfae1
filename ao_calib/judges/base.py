"""The judge interface: async and batched, one call per training step."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass, field


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


class Judge(ABC):
    name: str

    def __init__(self):
        self.stats = JudgeStats()

    def pop_step_stats(self) -> dict[str, float]:
        """Counters since the last call, logged once per training step (``judge/...``)."""
        return {}

    def totals(self) -> dict[str, float]:
        """Counters over the judge's lifetime, for summary.json."""
        return {"judge/calls": float(self.stats.calls), "judge/failures": float(self.stats.failures)}

    @abstractmethod
    async def score(self, items: Sequence[JudgeItem]) -> list[float | None]:
        """Informativeness in [0, 1] per item, or None where no judgment could be made (the sample is masked)."""
