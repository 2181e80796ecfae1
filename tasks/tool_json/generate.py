"""Generate a JSON tool-calling dataset in the task's row format (train and validation JSON arrays).

``python -m ao_calib_tasks.tool_json.generate --out PATH --n N --seed S [--val-fraction 0.1]
[--code-quotes repr|single|double]``

* ``PATH`` a directory: writes ``PATH/train.json`` and ``PATH/validation.json``.
* ``PATH`` ending in ``.json``: it is the train file, and the validation file is written beside it as
  ``<stem>_validation.json`` (``data/tj.json`` -> ``data/tj_validation.json``).

``N`` is the total number of rows; ``round(N * val_fraction)`` of them (at
least one when the fraction is positive) go to validation. Every prompt in the
dataset is distinct, so the two splits are disjoint by prompt. Categories are
drawn with :data:`DEFAULT_MIX`; when a category's distinct prompts run out
(only no_tool's fixed facts can, after roughly a thousand), the draw moves to
another category, so very large datasets hold proportionally fewer no_tool rows.
Everything is driven by one seeded ``random.Random``: the same arguments write
the same files.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
from collections import Counter
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from .quoting import QUOTE_STYLES, requote_strings
from .schema import CATEGORY_TOOL
from .templates import CATEGORY_EXAMPLES, Example

SOURCE = "ao_calib_tool_json_generated"
DEFAULT_MIX: dict[str, float] = {"calculator": 0.4, "python_exec": 0.35, "no_tool": 0.25}
_TRIES_PER_CATEGORY = 200


def make_row(example: Example, row_id: str) -> dict[str, Any]:
    """A row in the task's row format, its fields in the format's order."""
    tool = CATEGORY_TOOL[example.category]
    return {
        "id": row_id,
        "source": SOURCE,
        "category": example.category,
        "tool_needed": tool is not None,
        "tool": tool,
        "tool_args": dict(example.tool_args) if example.tool_args is not None else None,
        "prompt": example.prompt,
        "expected_answer": example.expected_answer,
    }


def generate_rows(n: int, seed: int, mix: Mapping[str, float] | None = None) -> list[dict[str, Any]]:
    """``n`` rows with distinct prompts; deterministic in ``seed`` (and ``mix``)."""
    if n < 1:
        raise ValueError(f"n must be at least 1, got {n}")
    mix = dict(mix or DEFAULT_MIX)
    unknown = set(mix) - set(CATEGORY_EXAMPLES)
    if unknown or not any(w > 0 for w in mix.values()):
        raise ValueError(f"mix needs positive weights over {sorted(CATEGORY_EXAMPLES)}, got {mix}")
    rng = random.Random(seed)
    seen: set[str] = set()
    rows: list[dict[str, Any]] = []
    exhausted: set[str] = set()
    while len(rows) < n:
        live = {c: w for c, w in mix.items() if w > 0 and c not in exhausted}
        if not live:
            raise ValueError(f"only {len(rows)} distinct prompts could be generated; ask for fewer rows")
        category = rng.choices(list(live), weights=list(live.values()))[0]
        for _ in range(_TRIES_PER_CATEGORY):
            example = CATEGORY_EXAMPLES[category](rng)
            if example.prompt not in seen:
                seen.add(example.prompt)
                rows.append(make_row(example, f"tool_json_{seed}_{len(rows):06d}"))
                break
        else:
            exhausted.add(category)
    return rows


def split_rows(rows: list[dict[str, Any]], val_fraction: float, seed: int | str
               ) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """A seeded random split into (train, validation); both keep generation order."""
    if not 0 <= val_fraction < 1:
        raise ValueError(f"val_fraction must be in [0, 1), got {val_fraction}")
    n_val = round(len(rows) * val_fraction)
    if val_fraction > 0 and len(rows) > 1:
        n_val = max(n_val, 1)
    n_val = min(n_val, len(rows) - 1)
    chosen = set(random.Random(f"{seed}-validation").sample(range(len(rows)), n_val))
    train = [r for i, r in enumerate(rows) if i not in chosen]
    validation = [r for i, r in enumerate(rows) if i in chosen]
    return train, validation


def generate_splits(n: int, seed: int, val_fraction: float = 0.1
                    ) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """``n`` rows in all, split into (train, validation), disjoint by prompt."""
    return split_rows(generate_rows(n, seed), val_fraction, seed)


def generate_three_splits(n: int, seed: int, test_fraction: float, validation_fraction: float,
                          code_quotes: str = "repr"
                          ) -> tuple[list[dict[str, Any]], list[dict[str, Any]], list[dict[str, Any]]]:
    """(train, validation, test), disjoint by prompt. The test rows are :func:`generate_splits`' held-out rows for
    the same ``n``, seed and ``test_fraction`` whatever ``validation_fraction`` is, so that adding a validation
    split leaves the test split as it was; ``round(n * validation_fraction)`` rows (at least one when positive)
    are then drawn out of the rest with another seeded draw. ``code_quotes`` rewrites the python rows' string
    literals in that style after the draws (:mod:`.quoting`), so the rows and splits stay the same."""
    train, test = generate_splits(n, seed, test_fraction)
    validation: list[dict[str, Any]] = []
    if validation_fraction > 0:
        n_val = max(1, round(n * validation_fraction))
        if n_val >= len(train):
            raise ValueError(f"validation_fraction {validation_fraction} leaves no training rows of {n}")
        train, validation = split_rows(train, n_val / len(train), f"{seed}-tuning")
    splits = train, validation, test
    return tuple([requoted(row, code_quotes) for row in rows] for rows in splits)


def requoted(row: dict[str, Any], style: str) -> dict[str, Any]:
    """``row`` with its program's string literals in ``style`` (:func:`.quoting.requote_strings`)."""
    if row["category"] != "python_exec" or style == "repr":
        return row
    return {**row, "tool_args": {**row["tool_args"], "code": requote_strings(row["tool_args"]["code"], style)}}


def output_paths(out: str | Path) -> tuple[Path, Path]:
    """(train file, validation file) for ``--out``: a directory, or a ``.json`` train file."""
    out = Path(out)
    if out.suffix == ".json":
        return out, out.with_name(f"{out.stem}_validation.json")
    return out / "train.json", out / "validation.json"


def write_rows(path: Path, rows: list[dict[str, Any]]) -> None:
    """One JSON array, indented two spaces a level."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(rows, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m ao_calib_tasks.tool_json.generate", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", required=True, help="output directory, or the train .json file")
    parser.add_argument("--n", type=int, default=2000, help="total rows, train plus validation (default 2000)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--val-fraction", type=float, default=0.1, help="share of rows for validation")
    parser.add_argument("--code-quotes", choices=QUOTE_STYLES, default="repr",
                        help="how the python rows' code quotes its strings (task.data.generate.code_quotes)")
    args = parser.parse_args(argv)
    if args.n < 1:
        parser.error("--n must be at least 1")
    if not 0 <= args.val_fraction < 1:
        parser.error("--val-fraction must be in [0, 1)")
    try:
        train, validation = generate_splits(args.n, args.seed, args.val_fraction)
    except ValueError as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    train, validation = ([requoted(row, args.code_quotes) for row in rows] for rows in (train, validation))
    train_path, val_path = output_paths(args.out)
    write_rows(train_path, train)
    write_rows(val_path, validation)
    counts = Counter(r["category"] for r in train + validation)
    print(f"wrote {len(train)} train rows to {train_path} and {len(validation)} validation rows to {val_path} "
          f"({', '.join(f'{c}: {counts[c]}' for c in CATEGORY_TOOL)})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
