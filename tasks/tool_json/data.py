"""Load and validate tool-calling rows (the task's row format), from a JSON array or JSONL.

Every row is checked at load time so that a bad file fails with the file, row
and field named, rather than as a KeyError or a silently zero reward mid-run.
Besides the types, a row must be consistent with its ``category``:

==============  ============  ===========  ===========================
category        tool          tool_needed  tool_args
==============  ============  ===========  ===========================
calculator      "calculator"  true         {"expression": str}
python_exec     "python"      true         {"code": str}
no_tool         null          false        null
==============  ============  ===========  ===========================

The expected expression must also evaluate through the safe evaluator and the
expected code must parse; otherwise no completion could ever earn the args
reward on that row. Ids must be unique. Extra fields are kept.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from ao_calib.core.data_files import read_data_text
from ao_calib.core.errors import DataValidationError, MissingDataFileError
from .rewards import python_ast_key
from .safe_eval import safe_eval
from .schema import CATEGORIES, CATEGORY_TOOL, TOOL_ARG_KEY

_STRING_FIELDS = ("id", "source", "category", "prompt", "expected_answer")


def _fail(source: str, index: int, field: str | None, reason: str) -> DataValidationError:
    return DataValidationError(source, index, field, reason)


def validate_row(row: Any, source: str, index: int) -> dict[str, Any]:
    """Return ``row`` if it is valid, else raise :class:`DataValidationError` naming the row and field."""
    if not isinstance(row, dict):
        raise _fail(source, index, None, f"expected a JSON object, got {type(row).__name__}")
    for name in ("id", "source", "category", "tool_needed", "tool", "tool_args", "prompt", "expected_answer"):
        if name not in row:
            raise _fail(source, index, name, "missing required field")
    for name in _STRING_FIELDS:
        if not isinstance(row[name], str):
            raise _fail(source, index, name, f"expected a string, got {type(row[name]).__name__}: {row[name]!r:.80}")
    for name in ("id", "prompt", "expected_answer"):
        if not row[name].strip():
            raise _fail(source, index, name, "must not be empty")
    category = row["category"]
    if category not in CATEGORIES:
        raise _fail(source, index, "category", f"expected one of {', '.join(CATEGORIES)}, got {category!r:.80}")
    if not isinstance(row["tool_needed"], bool):
        raise _fail(source, index, "tool_needed", f"expected a boolean, got {type(row['tool_needed']).__name__}")

    tool = CATEGORY_TOOL[category]
    if row["tool"] != tool:
        raise _fail(source, index, "tool", f"category {category!r} needs tool {tool!r}, got {row['tool']!r:.80}")
    if row["tool_needed"] is not (tool is not None):
        raise _fail(source, index, "tool_needed", f"category {category!r} needs tool_needed {tool is not None}")
    args = row["tool_args"]
    if tool is None:
        if args is not None:
            raise _fail(source, index, "tool_args", f"category {category!r} needs tool_args null, got {args!r:.80}")
        return row
    key = TOOL_ARG_KEY[tool]
    if not isinstance(args, dict) or set(args) != {key} or not isinstance(args[key], str):
        raise _fail(source, index, "tool_args", f"category {category!r} needs tool_args {{{key!r}: str}}, "
                                                f"got {args!r:.80}")
    if tool == "calculator" and safe_eval(args[key]) is None:
        raise _fail(source, index, "tool_args", f"expression does not evaluate safely: {args[key]!r:.80}")
    if tool == "python" and python_ast_key(args[key]) is None:
        raise _fail(source, index, "tool_args", f"code does not parse as Python: {args[key]!r:.80}")
    return row


def _read_records(path: Path, source: str) -> list[Any]:
    """The file's records: a JSON array (first non-blank character ``[``) or one JSON value per line."""
    text = read_data_text(path, "tool_json data file")
    if text.lstrip().startswith("["):
        try:
            records = json.loads(text)
        except json.JSONDecodeError as e:
            raise _fail(source, 0, None, f"not a valid JSON array (line {e.lineno}): {e.msg}") from e
        return records
    records = []
    for line_no, line in enumerate(text.split("\n"), start=1):
        if not line.strip():
            continue
        try:
            records.append(json.loads(line))
        except json.JSONDecodeError as e:
            raise _fail(source, len(records), None, f"(line {line_no}) not valid JSON: {e.msg}") from e
    return records


def load_rows(path: str | Path) -> list[dict[str, Any]]:
    """Read and validate every row of a JSON-array or JSONL file."""
    path = Path(path)
    source = str(path)
    if not path.is_file():
        raise MissingDataFileError(f"tool_json data file not found: {source} (create one with "
                                f"`python -m ao_calib_tasks.tool_json.generate --out DIR`)")
    records = _read_records(path, source)
    if not records:
        raise _fail(source, 0, None, "no rows")
    seen: dict[str, int] = {}
    for index, record in enumerate(records):
        validate_row(record, source, index)
        if record["id"] in seen:
            raise _fail(source, index, "id", f"duplicate id {record['id']!r} (first in row {seen[record['id']]})")
        seen[record["id"]] = index
    return records


def load_dataset(path: str | Path):
    """Validated rows as a ``datasets.Dataset``.

    ``datasets`` merges the mixed ``tool_args`` dicts into one struct
    (``{"expression": ..., "code": ...}`` with None for the absent key, None
    for no_tool rows); :func:`ao_calib_tasks.tool_json.schema.expected_arg` reads that
    form, so rewards and prompts work on it unchanged.
    """
    import datasets  # imported here: it is slow to import and only needed by this helper

    return datasets.Dataset.from_list(load_rows(path))
