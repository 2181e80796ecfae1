"""The label judge: for questions with a known yes/no answer, informativeness is 1 when the answer is right."""

from __future__ import annotations

from collections.abc import Sequence

from ao_calib.judges.base import Judge, JudgeItem, note_failure

_STRIP = ".!?,;:'\" \n\t"


def yes_no(text: str) -> str | None:
    """"yes"/"no" when the answer's first word is one (punctuation and case ignored), else None."""
    words = text.strip().split()
    if not words:
        return None
    first = words[0].strip(_STRIP).lower()
    return first if first in ("yes", "no") else None


class LabelJudge(Judge):
    async def score(self, items: Sequence[JudgeItem]) -> list[float | None]:
        scores: list[float | None] = []
        for item in items:
            self.stats.calls += 1
            expected = yes_no(item.label) if item.label else None
            if expected is None:
                self.stats.failures += 1  # no known answer: nothing to judge against, so the sample is masked
                note_failure("label", "the row has no yes/no answer to judge against")
                scores.append(None)
            else:
                scores.append(1.0 if yes_no(item.answer) == expected else 0.0)
        return scores
