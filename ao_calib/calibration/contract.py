"""The epistemic-status contract every confidence-stating task shares: ``[epistemic status: NN] answer``."""

from __future__ import annotations

import re
from typing import NamedTuple

from ao_calib.core.errors import AOCalibError

DEFAULT_CONFIDENCE = 50  # an unparseable answer claims no knowledge either way

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


class NumberTokens(NamedTuple):
    """The tokens a stated number can begin with, and the number each stands for."""

    ids: list[int]  # the first token of every number 0-100 as the tag writes it, each once
    values: dict[int, int]  # index into ids -> the one target number that begins with that token
    prefix: str  # the tag's text before that token ("[epistemic status: ", or without the space the token holds)


def number_tokens(tokenizer, numbers, setting: str = "warmup.confidence_loss=calibration") -> NumberTokens:
    """The first token of each number 0-100 written in its tag (``[epistemic status: NN]``, where a tokenizer
    may join the space before NN to it), and which of ``numbers`` (the targets') each one begins. On a tokenizer
    that splits numbers into digits (SmolLM2) these are the ten digits, and a number is read off its first digit;
    on one that writes " 50" as a single token, off that token. Refused, naming them, when two of ``numbers``
    begin with the same token: it would not say which was meant (the message names ``setting``)."""
    ids: list[int] = []
    values: dict[int, int] = {}
    prefix = None
    for number in range(101):
        tag = format_epistemic_status(number, "Yes")
        offset, _ = confidence_span(tag)  # where NN starts in the tag
        encoded = tokenizer(tag, add_special_tokens=False, return_offsets_mapping=True)
        first, start = next((token, start) for token, (start, end) in zip(encoded["input_ids"],
                                                                          encoded["offset_mapping"])
                            if start <= offset < end)
        prefix = prefix or tag[:start]
        if first not in ids:
            ids.append(first)
        if number in numbers:
            index = ids.index(first)
            if index in values:
                raise AOCalibError(f"{setting} reads a number off its first token, and this "
                                   f"tokenizer begins {values[index]} and {number} with the same one "
                                   f"({tokenizer.decode([first])!r}): choose numbers that begin differently")
            values[index] = number
    return NumberTokens(ids, values, prefix)
