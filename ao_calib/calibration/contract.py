"""The epistemic-status contract every confidence-stating task shares: ``[epistemic status: NN] answer``."""

from __future__ import annotations

import re
from typing import NamedTuple

DEFAULT_CONFIDENCE = 50  # an unparseable answer claims no knowledge either way (the oracle design notes' rule)

# What a task appends to its prompt when it asks a model that was never taught the tag (function calling, tool
# JSON); the oracle learns the tag in its warm-up instead.
CONFIDENCE_INSTRUCTION = ("\n\nBegin your reply with [epistemic status: NN], where NN (0-100) is your confidence "
                          "that your answer is exactly right, then give the answer.")

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


def confidence_span(text: str) -> tuple[int, int] | None:
    """The character span of the digits NN in ``text``'s valid tag; None when ``parse_epistemic_status`` would
    not parse one. The tokens over this span are the ones that state the confidence."""
    match = _TAG.match(text)
    if match is None or int(match.group(1)) > 100:
        return None
    return match.span(1)


def tag_span(text: str) -> tuple[int, int] | None:
    """The character span of ``text``'s whole valid tag, ``[epistemic status: NN]`` without the spaces after it (a
    tokenizer joins them to the answer's first word); None when ``parse_epistemic_status`` would not parse one."""
    match = _TAG.match(text)
    if match is None or int(match.group(1)) > 100:
        return None
    return match.start(0), match.start(0) + len(match.group(0).rstrip())


def first_digit_values(numbers) -> dict[int, int]:
    """Each first digit of ``numbers`` (0-100) and the one number it begins: how a number is read from its first
    digit's distribution (``warmup.confidence_loss=calibration``). Raises ValueError, naming them, when two numbers
    begin with the same digit (10 and 100 do), since the first digit then does not say which was meant."""
    values: dict[int, int] = {}
    for number in sorted({int(n) for n in numbers}):
        if not 0 <= number <= 100:
            raise ValueError(f"{number} is not a confidence (0-100)")
        digit = int(str(number)[0])
        if digit in values:
            raise ValueError(f"{values[digit]} and {number} both begin with the digit {digit}: one number per first "
                             "digit (e.g. 0, 20, 30, ..., 90, 100)")
        values[digit] = number
    return values


def scored_confidence(stated: float | None) -> float:
    """The confidence a figure counts for a predictions row's ``scores.confidence``: the stated value in [0, 1],
    or ``DEFAULT_CONFIDENCE`` when the answer stated none (null in the row)."""
    return DEFAULT_CONFIDENCE / 100 if stated is None else float(stated)


def format_epistemic_status(confidence: int, answer: str) -> str:
    return f"[epistemic status: {int(confidence)}] {answer}"
