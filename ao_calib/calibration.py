"""The oracle's output contract, ``[epistemic status: NN] answer``, and the calibration reward."""

from __future__ import annotations

import re
from typing import NamedTuple

DEFAULT_CONFIDENCE = 50  # the seed's fallback: an unparseable answer claims no knowledge either way

# The tag must open the text (leading whitespace allowed); case and inner spaces are free; NN is 1-3 digits.
_TAG = re.compile(r"\A\s*\[\s*epistemic\s+status\s*:\s*(\d{1,3})\s*\]\s*", re.IGNORECASE)


class EpistemicStatus(NamedTuple):
    confidence: int
    answer: str
    parsed: bool


def parse_epistemic_status(text: str) -> EpistemicStatus:
    """``(confidence 0-100, answer, parsed)``. A missing, malformed or out-of-range tag gives confidence 50 and
    ``parsed=False``, with the whole stripped text as the answer."""
    match = _TAG.match(text)
    if match is None or int(match.group(1)) > 100:
        return EpistemicStatus(DEFAULT_CONFIDENCE, text.strip(), False)
    return EpistemicStatus(int(match.group(1)), text[match.end():].strip(), True)


def format_epistemic_status(confidence: int, answer: str) -> str:
    return f"[epistemic status: {int(confidence)}] {answer}"


def calibration_reward(informativeness: float, confidence: float, lam: float) -> float:
    """``informativeness − λ·(confidence/100 − informativeness)²``: be informative, and say how sure you are."""
    return informativeness - lam * (confidence / 100.0 - informativeness) ** 2


def tagged_reward(informativeness: float, status: EpistemicStatus, lam: float, unparsed_margin: float | None
                  ) -> float:
    """The calibration reward of a parsed completion; an untagged one scores ``−λ − margin``, below any tagged
    answer (``unparsed_margin=None`` keeps the seed's rule: the formula with confidence 50)."""
    if not status.parsed and unparsed_margin is not None:
        return -lam - unparsed_margin
    return calibration_reward(informativeness, status.confidence, lam)


def brier_term(informativeness: float, confidence: float) -> float:
    return (confidence / 100.0 - informativeness) ** 2
