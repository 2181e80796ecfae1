"""Oracle data files: labelled yes/no rows, and the WildChat oracle-questions format (docs/concepts/oracle.md)."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import datasets

from ao_calib.core.data_files import read_data_text
from ao_calib.core.errors import AOCalibError, DataValidationError, MissingDataFileError
from ao_calib.judges.label import yes_no

log = logging.getLogger(__name__)


def load_labelled_rows(path: str | Path, what: str = "oracle data file") -> list[dict]:
    """Rows with non-empty string ``prompt`` and ``question`` and an ``answer`` of Yes or No (any case).
    Extra fields are kept. Errors name the row and the field; a missing file is named as ``what``."""
    path = Path(path)
    text = read_data_text(path, what)
    rows = []
    lines = [(n, line) for n, line in enumerate(text.splitlines(), start=1) if line.strip()]
    for index, (line_no, line) in enumerate(lines):
        try:
            row = json.loads(line)
        except json.JSONDecodeError as exc:
            raise DataValidationError(str(path), index, None, f"(line {line_no}) not valid JSON ({exc.msg})") from None
        if not isinstance(row, dict):
            raise DataValidationError(str(path), index, None, f"(line {line_no}) a row must be a JSON object")
        for field in ("prompt", "question"):
            if not isinstance(row.get(field), str) or not row[field].strip():
                raise DataValidationError(str(path), index, field, f"(line {line_no}) must be a non-empty string")
        if not isinstance(row.get("answer"), str) or yes_no(row["answer"]) is None:
            raise DataValidationError(str(path), index, "answer",
                                      f"(line {line_no}) must be Yes or No, got {row.get('answer')!r}")
        rows.append({**row, "answer": yes_no(row["answer"]).capitalize(), "kind": row.get("kind", "labelled")})
    if not rows:
        raise DataValidationError(str(path), 0, None, "no rows")
    return rows


WILDCHAT_HUB_ID = "ceselder/wildchat-oracle-questions"


def _is_binary(question: str) -> bool:
    """Yes/no questions open with an auxiliary verb ("Is", "Does", "Can", ...); the rest are open questions."""
    first = question.strip().split(" ", 1)[0].lower()
    return first in {"is", "are", "was", "were", "do", "does", "did", "can", "could", "will", "would", "should",
                     "has", "have", "had", "am", "may", "might", "must", "shall"}


def _wildchat_records(source: str | Path) -> tuple[list, str]:
    path = Path(source)
    if path.exists():
        text = read_data_text(path, "WildChat oracle-questions data")
        if path.suffix == ".jsonl":
            records = []
            lines = [(n, line) for n, line in enumerate(text.splitlines(), start=1) if line.strip()]
            for index, (line_no, line) in enumerate(lines):
                try:
                    records.append(json.loads(line))
                except json.JSONDecodeError as exc:
                    records.append(DataValidationError(str(path), index, None,
                                                       f"(line {line_no}) not valid JSON ({exc.msg})"))
            return records, str(path)
        try:
            records = json.loads(text)
        except json.JSONDecodeError as exc:
            raise DataValidationError(str(path), 0, None, f"the file is not valid JSON ({exc.msg})") from None
        if not isinstance(records, list):
            raise DataValidationError(str(path), 0, None, "a JSON file must hold a list of rows")
        return records, str(path)
    if "/" in str(source) and not str(source).startswith((".", "/")):
        import datasets

        try:
            return datasets.load_dataset(str(source), split="train").to_list(), str(source)
        except Exception as exc:  # noqa: BLE001 -- any hub failure becomes one clear message
            raise AOCalibError(f"could not load the hub dataset {source} ({type(exc).__name__}: {exc}); "
                               "pass a local JSON/JSONL file as task.data.path") from None
    raise MissingDataFileError(f"WildChat oracle-questions data not found: {source}")


def load_wildchat(source: str | Path = WILDCHAT_HUB_ID, strict: bool = False) -> datasets.Dataset:
    """Rows of the WildChat oracle-questions format (``wildchat_question``, ``language``, ``oracle_questions``;
    extra fields kept) from a hub id or a local JSON/JSONL file, flattened to one row per (prompt, question) with
    ``prompt``, ``question`` and ``question_type`` (binary | open). Bad rows are reported by index and skipped,
    or raised with ``strict``."""
    records, name = _wildchat_records(source)
    rows, bad = [], []
    for index, record in enumerate(records):
        try:
            rows += _wildchat_rows(record, name, index)
        except DataValidationError as exc:
            if strict:
                raise
            bad.append(str(exc))
    for message in bad:
        log.warning("skipped bad row: %s", message)
    if bad:
        log.warning("%s: %d of %d rows skipped (set task.data.strict=true to stop on the first)", name, len(bad),
                    len(records))
    if not rows:
        raise DataValidationError(name, 0, None, "no usable rows")
    return datasets.Dataset.from_list(rows)


def _wildchat_rows(record, name: str, index: int) -> list[dict]:
    if isinstance(record, DataValidationError):
        raise record
    if not isinstance(record, dict):
        raise DataValidationError(name, index, None, "a row must be a JSON object")
    prompt = record.get("wildchat_question")
    if not isinstance(prompt, str) or not prompt.strip():
        raise DataValidationError(name, index, "wildchat_question", "must be a non-empty string")
    questions = record.get("oracle_questions")
    if not isinstance(questions, list) or not questions or not all(isinstance(q, str) and q.strip()
                                                                     for q in questions):
        raise DataValidationError(name, index, "oracle_questions", "must be a non-empty list of non-empty strings")
    extra = {k: v for k, v in record.items() if k not in ("wildchat_question", "oracle_questions")}
    return [{**extra, "prompt": prompt, "question": q, "question_type": "binary" if _is_binary(q) else "open",
             "source_row": index} for q in questions]
