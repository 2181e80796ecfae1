"""The files ``make_questions`` reads and writes, and the model's reply it parses: the prompts file (one JSON
object a line, each with a prompt and optionally its language), the questions parsed out of a reply (the first JSON
array, fences and chatter around it ignored), and the output rows, written atomically."""

from __future__ import annotations

import ast
import json
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from ao_calib.core.errors import AOCalibError
from ao_calib.core.io import atomic_write_text

PROMPT_FIELDS = ("prompt", "wildchat_question")
UNKNOWN_LANGUAGE = "unknown"


_FENCE = re.compile(r"```[A-Za-z0-9_+-]*[ \t]*\n?(.*?)```", re.S)


def _clean(items, n: int) -> list[str]:
    """Non-empty strings, whitespace-normalised, de-duplicated (case-insensitive, first kept), at most ``n``."""
    out, seen = [], set()
    for item in items:
        if not isinstance(item, str):
            continue
        q = " ".join(item.split())
        if not q or q.lower() in seen:
            continue
        seen.add(q.lower())
        out.append(q)
        if len(out) >= n:
            break
    return out


def _first_array(text: str) -> list | None:
    """The first JSON array in ``text`` that holds at least one non-empty string."""
    decoder = json.JSONDecoder()
    for m in re.finditer(r"\[", text):
        try:
            value, _ = decoder.raw_decode(text, m.start())
        except ValueError:
            continue
        if isinstance(value, list) and any(isinstance(v, str) and v.strip() for v in value):
            return value
    # Not JSON: a Python-style list (single quotes, a trailing comma) from the first "[" to the last "]".
    start, end = text.find("["), text.rfind("]")
    if 0 <= start < end:
        try:
            value = ast.literal_eval(text[start:end + 1])
        except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
            return None
        if isinstance(value, (list, tuple)):
            return list(value)
    return None


def parse_questions(text: str | None, n: int) -> list[str]:
    """The questions in an LLM reply: the first JSON array of strings (inside a code fence first, if any), its
    strings cleaned, de-duplicated and capped at ``n``; ``[]`` when there is none."""
    if not text or n < 1:
        return []
    for block in [*_FENCE.findall(text), text]:
        found = _first_array(block)
        if found is not None:
            questions = _clean(found, n)
            if questions:
                return questions
    return []


# --------------------------------------------------------------------------------------------- input / output


@dataclass
class PromptRow:
    index: int  # 0-based position in the input (rows and lines, blank lines not counted)
    prompt: str
    language: str
    extra: dict = field(default_factory=dict)  # the row's other fields, kept in the output


def _row_from(value, index: int, language_field: str) -> PromptRow:
    if isinstance(value, str):
        value = {"prompt": value}
    if not isinstance(value, dict):
        raise ValueError("a row must be a JSON object or a string")
    name = next((f for f in PROMPT_FIELDS if isinstance(value.get(f), str) and value[f].strip()), None)
    if name is None:
        raise ValueError(f"no non-empty '{PROMPT_FIELDS[0]}' or '{PROMPT_FIELDS[1]}' field")
    language = value.get(language_field)
    language = language.strip() if isinstance(language, str) and language.strip() else UNKNOWN_LANGUAGE
    extra = {k: v for k, v in value.items() if k not in (*PROMPT_FIELDS, "oracle_questions", "language")}
    return PromptRow(index=index, prompt=value[name], language=language, extra=extra)


def read_prompts(path: str | Path, language_field: str = "language") -> tuple[list[PromptRow], list[str]]:
    """The prompts in ``path`` and one message per bad row (skipped). ``.json``: a list of rows; ``.jsonl``: one
    row per line; ``.txt`` (or anything else that is not JSON): one prompt per non-blank line."""
    path = Path(path)
    if not path.is_file():
        raise AOCalibError(f"prompts file not found: {path}")
    text = path.read_text(encoding="utf-8")
    suffix = path.suffix.lower()
    values: list = []
    if suffix == ".json":
        try:
            values = json.loads(text)
        except json.JSONDecodeError as e:
            raise AOCalibError(f"{path}: not valid JSON ({e.msg})") from None
        if not isinstance(values, list):
            raise AOCalibError(f"{path}: a JSON file must hold a list of rows")
    elif suffix in (".jsonl", ".ndjson"):
        values = [line for line in text.splitlines() if line.strip()]
    else:
        values = [line.strip() for line in text.splitlines() if line.strip()]
    rows, bad = [], []
    for index, value in enumerate(values):
        try:
            if suffix in (".jsonl", ".ndjson"):
                try:
                    value = json.loads(value)
                except json.JSONDecodeError as e:
                    raise ValueError(f"not valid JSON ({e.msg})") from None
            rows.append(_row_from(value, index, language_field))
        except ValueError as e:
            bad.append(f"{path}: row {index}: {e}")
    return rows, bad


def output_record(row: PromptRow, questions: list[str]) -> dict:
    return {**row.extra, "wildchat_question": row.prompt, "language": row.language, "oracle_questions": questions}


def write_jsonl_atomic(path: str | Path, records: Sequence[dict]) -> None:
    atomic_write_text(path, "".join(json.dumps(record, ensure_ascii=False) + "\n" for record in records))


# --------------------------------------------------------------------------------------------- cache
