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
from ao_calib.core.io import atomic_write_text

_VERSION = 1


def judgment_key(model: str, prompt_text: str, question: str, answer: str) -> str:
    """sha256 over the judge model, the full prompt text sent, the question and the answer."""
    payload = json.dumps([_VERSION, model, prompt_text, question, answer], ensure_ascii=False, separators=(",", ":"))
    return hashlib.sha256(payload.encode("utf-8")).hexdigest()


class KeyedFileCache:
    """One JSON file per key, ``<directory>/<key[:2]>/<key>.json``, holding ``{"key": key, ...fields}``: ``read``
    returns the fields of a whole entry stored under that very key (None on a miss, an unreadable file or one
    holding another key), ``write`` moves a whole entry into place. Subclasses check what their entries hold."""

    def __init__(self, directory: str | os.PathLike):
        self.directory = Path(directory).expanduser()
        self.directory.mkdir(parents=True, exist_ok=True)

    def path(self, key: str) -> Path:
        if len(key) < 3 or not all(c in "0123456789abcdef" for c in key):
            raise ValueError(f"not a cache key: {key!r}")
        return self.directory / key[:2] / f"{key}.json"

    def read(self, key: str) -> dict | None:
        try:
            with open(self.path(key), encoding="utf-8") as f:
                entry = json.load(f)
        except (OSError, ValueError):  # missing, unreadable, truncated or not JSON (UnicodeDecodeError included)
            return None
        return entry if isinstance(entry, dict) and entry.get("key") == key else None

    def write(self, key: str, **fields) -> None:
        atomic_write_text(self.path(key), json.dumps({"key": key, **fields}, ensure_ascii=False))

    def __len__(self) -> int:
        return sum(1 for _ in self.directory.glob("??/*.json"))

    def __repr__(self) -> str:
        return f"{type(self).__name__}({str(self.directory)!r})"


class JudgmentCache(KeyedFileCache):
    """``get(key) -> float | None`` and ``put(key, score, raw)``; scores are normalised to [0, 1]."""

    key = staticmethod(judgment_key)

    def get_entry(self, key: str) -> dict | None:
        """The stored entry ``{"key", "score", "raw"}``, or None on a miss or an unreadable/invalid file."""
        entry = self.read(key)
        score = None if entry is None else entry.get("score")
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
        self.write(key, score=score, raw=raw)
