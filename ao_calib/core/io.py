"""Small file helpers: writes that never leave a half-written file behind, and the line-numbered JSON-lines
reader that data loaders and CLIs share."""

from __future__ import annotations

import json
import math
import os
import tempfile
from pathlib import Path
from typing import Any

from ao_calib.core.data_files import read_data_text
from ao_calib.core.errors import DataValidationError


def atomic_write_text(path: str | Path, text: str) -> None:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w") as f:
            f.write(text)
        os.chmod(tmp, 0o644)  # mkstemp creates 0600; results are meant to be shared
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def json_safe(obj: Any) -> Any:
    """``obj`` with every NaN or infinite float as None: JSON has no NaN, and strict parsers refuse Python's
    ``NaN``/``Infinity`` extension. A reader takes null for "not computable" (an AUROC over one class)."""
    if isinstance(obj, float):
        return obj if math.isfinite(obj) else None
    if isinstance(obj, dict):
        return {key: json_safe(value) for key, value in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [json_safe(value) for value in obj]
    if hasattr(obj, "item") and getattr(obj, "ndim", None) == 0:  # a numpy or torch scalar
        return json_safe(obj.item())
    return obj


def nulls_as_nan(obj: Any) -> Any:
    """Figures read back from a file ``write_json`` wrote, each null a NaN again: for a reader that formats or
    averages them (a missing key stays missing)."""
    if obj is None:
        return math.nan
    if isinstance(obj, dict):
        return {key: nulls_as_nan(value) for key, value in obj.items()}
    if isinstance(obj, list):
        return [nulls_as_nan(value) for value in obj]
    return obj


def write_json(path: str | Path, obj: Any) -> None:
    """``obj`` as indented JSON that any parser reads: NaN and infinities written as null (``json_safe``)."""
    atomic_write_text(path, json.dumps(json_safe(obj), indent=2, default=str, allow_nan=False) + "\n")


def write_jsonl(path: str | Path, records: list[dict]) -> None:
    """``records`` as the whole file, one JSON line each, replaced in one step:
    a process stopped while writing leaves the old file, never a half-written one."""
    atomic_write_text(path, "".join(json.dumps(record, default=str) + "\n" for record in records))


def ensure_generated(paths: list[Path], build) -> list[Path]:
    """Generated data cached on disk: ``build()`` returns one text per path and runs only when a file is missing
    (generation is deterministic, so a half-finished earlier attempt is simply redone)."""
    if not all(p.exists() for p in paths):
        for path, text in zip(paths, build(), strict=True):
            atomic_write_text(path, text)
    return paths


def read_jsonl(path: str | Path, what: str) -> list[tuple[int, Any]]:
    """The rows of a JSON-lines file, each with its 1-based line number (blank lines skipped), for messages that
    name the line. A missing file raises ``MissingDataFileError`` ("<what> not found: <path>"; an AOCalibError, so
    CLIs exit 2, and a FileNotFoundError); bytes that are not UTF-8, a line that is not JSON and a file without rows
    raise errors naming the file and the line."""
    source = str(path)
    rows: list[tuple[int, Any]] = []
    for line_no, line in enumerate(read_data_text(path, what).split("\n"), start=1):
        if not line.strip():
            continue
        try:
            rows.append((line_no, json.loads(line)))
        except json.JSONDecodeError as exc:
            raise DataValidationError(source, len(rows), None, f"(line {line_no}) not valid JSON: {exc.msg}") from None
    if not rows:
        raise DataValidationError(source, 0, None, "no rows")
    return rows
