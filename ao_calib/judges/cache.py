"""A disk cache of judgments, safe to share between processes.

Each judgment is one small JSON file, ``<directory>/<key[:2]>/<key>.json``, written to a temporary file in the
same folder and moved into place with ``os.replace``: a reader sees either no file or a whole one, and two writers
of the same key simply leave one of two identical answers. A file that cannot be read or does not hold a valid
entry for its key is a miss (the next ``put`` overwrites it).
"""

from __future__ import annotations

import hashlib
import json
import math
import os

from pathlib import Path
from ao_calib.io import atomic_write_text

_VERSION = 1


def judgment_key(model: str, prompt_text: str, question: str, answer: str) -> str:
    """sha256 over the judge model, the full prompt text sent, the question and the answer."""
    payload = json.dumps([_VERSION, model, prompt_text, question, answer], ensure_ascii=False, separators=(",", ":"))
    return hashlib.sha256(payload.encode("utf-8")).hexdigest()


class JudgmentCache:
    """``get(key) -> float | None`` and ``put(key, score, raw)``; scores are normalised to [0, 1]."""

    def __init__(self, directory: str | os.PathLike):
        self.directory = Path(directory).expanduser()
        self.directory.mkdir(parents=True, exist_ok=True)

    key = staticmethod(judgment_key)

    def path(self, key: str) -> Path:
        if len(key) < 3 or not all(c in "0123456789abcdef" for c in key):
            raise ValueError(f"not a judgment key: {key!r}")
        return self.directory / key[:2] / f"{key}.json"

    def get_entry(self, key: str) -> dict | None:
        """The stored entry ``{"key", "score", "raw"}``, or None on a miss or an unreadable/invalid file."""
        try:
            with open(self.path(key), encoding="utf-8") as f:
                entry = json.load(f)
        except (OSError, ValueError):  # missing, unreadable, truncated or not JSON (UnicodeDecodeError included)
            return None
        if not isinstance(entry, dict) or entry.get("key") != key:
            return None
        score = entry.get("score")
        if isinstance(score, bool) or not isinstance(score, (int, float)) or not math.isfinite(score):
            return None
        if not 0.0 <= score <= 1.0:
            return None
        return entry

    def get(self, key: str) -> float | None:
        entry = self.get_entry(key)
        return None if entry is None else float(entry["score"])

    def put(self, key: str, score: float, raw: str) -> None:
        score = float(score)
        if not (math.isfinite(score) and 0.0 <= score <= 1.0):
            raise ValueError(f"a cached score must be in [0, 1], got {score}")
        target = self.path(key)
        atomic_write_text(target, json.dumps({"key": key, "score": score, "raw": raw}, ensure_ascii=False))

    def __len__(self) -> int:
        return sum(1 for _ in self.directory.glob("??/*.json"))

    def __repr__(self) -> str:
        return f"JudgmentCache({str(self.directory)!r})"
