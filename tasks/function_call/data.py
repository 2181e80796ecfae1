"""Load and validate function-calling JSONL files (the task's row format, docs/concepts/function_calling.md).

Rows are checked up front so a bad file fails at load time with the file, row
and field named, instead of as a KeyError or a silent zero reward mid-training.
In particular every ``answer`` must parse to at least one call, since an
unparseable answer would make every completion score as wrong.
"""

from __future__ import annotations

import json
import numbers
from pathlib import Path
from typing import Any

import datasets

from ao_calib.core.data_files import read_data_text
from ao_calib.core.errors import DataValidationError, MissingDataFileError
from .parsing import parse_calls


def _is_str(v: Any) -> bool:
    return isinstance(v, str)


def _is_nonempty_str(v: Any) -> bool:
    return isinstance(v, str) and bool(v.strip())


def _is_str_list(v: Any) -> bool:
    return isinstance(v, list) and all(isinstance(x, str) for x in v)


def _is_bool(v: Any) -> bool:
    return isinstance(v, bool)


def _is_number(v: Any) -> bool:
    return isinstance(v, numbers.Real) and not isinstance(v, bool)


# field -> (check, what the reason says was expected)
REQUIRED_FIELDS = {
    "prompt": (_is_nonempty_str, "a non-empty string"),
    "answer": (_is_str, "a string"),
    "type": (_is_str, "a string"),
    "ground_truth": (_is_str, "a string"),
    "ground_truth_text": (_is_str, "a string"),
    "possible_boxed_answers": (_is_str_list, "a list of strings"),
    "is_multi_answer": (_is_bool, "a boolean"),
    "confidence": (_is_number, "a number"),
    "source": (_is_str, "a string"),
}


def validate_row(row: Any, source: str, index: int, line_no: int) -> dict[str, Any]:
    """Return ``row`` if valid, else raise :class:`DataValidationError` naming the field."""
    where = f"(line {line_no})"
    if not isinstance(row, dict):
        raise DataValidationError(source, index, None, f"{where} expected a JSON object, got {type(row).__name__}")
    for name, (check, expected) in REQUIRED_FIELDS.items():
        if name not in row:
            raise DataValidationError(source, index, name, f"{where} missing required field")
        if not check(row[name]):
            got = type(row[name]).__name__
            raise DataValidationError(source, index, name, f"{where} expected {expected}, got {got}: {row[name]!r:.80}")
    if not parse_calls(row["answer"]):
        raise DataValidationError(
            source, index, "answer", f"{where} no function call could be parsed from {row['answer']!r:.80}"
        )
    return row


def load_rows(path: str | Path) -> list[dict[str, Any]]:
    """Read and validate every non-blank line of a JSONL file; extra fields are kept."""
    path = Path(path)
    source = str(path)
    if not path.is_file():
        raise MissingDataFileError(f"function-calling data file not found: {source}")
    rows: list[dict[str, Any]] = []
    lines = read_data_text(path, "function-calling data file").split("\n")
    for line_no, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        index = len(rows)
        try:
            row = json.loads(line)
        except json.JSONDecodeError as e:
            raise DataValidationError(source, index, None, f"(line {line_no}) not valid JSON: {e.msg}") from e
        rows.append(validate_row(row, source, index, line_no))
    if not rows:
        raise DataValidationError(source, 0, None, "no rows")
    return rows


def load_dataset(path: str | Path) -> datasets.Dataset:
    """Validated rows as a :class:`datasets.Dataset`; a field missing from some rows becomes None there."""
    rows = load_rows(path)
    columns = list(dict.fromkeys(k for row in rows for k in row))
    return datasets.Dataset.from_list([{k: row.get(k) for k in columns} for row in rows])
