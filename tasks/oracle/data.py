"""Labelled oracle rows from JSONL: one (target prompt, yes/no question, answer) per line."""

from __future__ import annotations

import json
from pathlib import Path

from ao_calib.errors import DataValidationError
from ao_calib.judges.label import yes_no


def load_labelled_rows(path: str | Path) -> list[dict]:
    """Rows with non-empty string ``prompt`` and ``question`` and an ``answer`` of Yes or No (any case).
    Extra fields are kept. Errors name the row and the field."""
    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(f"oracle data file not found: {path}")
    rows = []
    for index, line in enumerate(l for l in path.read_text().splitlines() if l.strip()):
        try:
            row = json.loads(line)
        except json.JSONDecodeError as exc:
            raise DataValidationError(str(path), index, None, f"not valid JSON ({exc.msg})") from None
        if not isinstance(row, dict):
            raise DataValidationError(str(path), index, None, "a row must be a JSON object")
        for field in ("prompt", "question"):
            if not isinstance(row.get(field), str) or not row[field].strip():
                raise DataValidationError(str(path), index, field, "must be a non-empty string")
        if not isinstance(row.get("answer"), str) or yes_no(row["answer"]) is None:
            raise DataValidationError(str(path), index, "answer", f"must be Yes or No, got {row.get('answer')!r}")
        rows.append({**row, "answer": yes_no(row["answer"]).capitalize(), "kind": row.get("kind", "labelled")})
    if not rows:
        raise DataValidationError(str(path), 0, None, "no rows")
    return rows
