"""The held-out file of an oracle run (``task.data.test_path``), whatever its layout: its own module, since it
reads both the project's labelled JSONL (``files``) and the paper's classification files
(``classification.datasets``)."""

from __future__ import annotations

from pathlib import Path

from ao_calib.core.errors import DataValidationError

from ..classification.datasets import is_engels, load_labelled_file
from .files import load_labelled_rows


def load_held_out_rows(path: str | Path, seed: int = 0, all_paraphrases: bool = False) -> list[dict]:
    """The rows of a labelled held-out file (``task.data.test_path``): ``prompt``, ``question``, ``answer`` (Yes or
    No) and ``kind``, extra fields kept. The one place a held-out file is read, whatever its layout: the project's
    labelled JSONL (``load_labelled_rows``), or a CSV/JSON file of the Activation Oracle paper's classification
    formats, Engels probes included (``classification.datasets.load_labelled_file``: questions drawn from every
    paraphrase with ``all_paraphrases``, by ``seed``), whose rows also carry ``dataset`` (their ``kind``) and
    ``in_distribution`` (false for an Engels probe)."""
    what = "the held-out file (task.data.test_path)"
    if Path(path).suffix.lower() not in (".csv", ".json") or not Path(path).is_file():
        return load_labelled_rows(path, what)
    try:
        rows = load_labelled_file(path, seed, all_paraphrases=all_paraphrases)
    except DataValidationError as exc:
        raise DataValidationError(f"{path} ({what})", exc.row, exc.field, exc.reason) from None
    if not rows:
        raise DataValidationError(str(path), 0, None, f"no rows ({what})")
    return [{**r, "kind": r["dataset"], "in_distribution": not is_engels(r["dataset"])} for r in rows]
