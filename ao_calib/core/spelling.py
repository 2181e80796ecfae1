"""The one "did you mean" engine: the names closest to a word a user typed that names nothing (``--help <key>``, an
override of an unknown key or group option, an unknown option of a command)."""

from __future__ import annotations

import difflib
from collections.abc import Iterable


def closest(word: str, keys: Iterable[str], names: Iterable[str] | None = None, limit: int = 6) -> list[str]:
    """The dotted ``keys`` whose last parts are ``word`` (``lr``: ``trainer.lr``), then the ``names`` (the keys when
    not given) spelt closest to it, at most ``limit``."""
    keys = list(keys)
    close = [key for key in keys if key.endswith("." + word)]
    spelt = difflib.get_close_matches(word, keys if names is None else list(names), n=5, cutoff=0.6)
    return (close + [name for name in spelt if name not in close])[:limit]
