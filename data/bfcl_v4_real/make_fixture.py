"""Regenerate this fixture of real BFCL v4 cases from an unpacked ``bfcl-eval`` wheel.

    pip download --no-deps bfcl-eval==2026.3.23 -d /tmp/bfcl
    unzip -q /tmp/bfcl/bfcl_eval-2026.3.23-py3-none-any.whl -d /tmp/bfcl/wheel
    python data/bfcl_v4_real/make_fixture.py /tmp/bfcl/wheel/bfcl_eval/data
    python data/bfcl_v4_real/make_fixture.py /tmp/bfcl/wheel/bfcl_eval/data --split validation

Per category: ``random.Random(SEED).sample`` of N ids out of all of the category's ids (in file order), the
chosen rows written in their original file order, each row copied as its original JSON line byte for byte.
``--split validation`` writes ``data/bfcl_v4_real_validation``: per category, N more ids drawn with
``random.Random(VALIDATION_SEED)`` from those the test fixture did not take, for choosing settings on real cases
without scoring the test fixture (never for training either).
BFCL ships no possible_answer file for ``irrelevance``, and none is written: the loader reads such a file without.
Standard library only; deterministic.
"""

from __future__ import annotations

import json
import random
import sys
from pathlib import Path

SEED = 0
VALIDATION_SEED = 1
N = 30
CATEGORIES = ("simple_python", "multiple", "parallel", "parallel_multiple", "irrelevance")
NO_ANSWER_FILE = ("irrelevance",)  # BFCL has no possible_answer file for these: the right answer is no call
HERE = Path(__file__).resolve().parent
OUT = {"test": HERE, "validation": HERE.parent / "bfcl_v4_real_validation"}


def raw_rows(path: Path) -> dict[str, str]:
    """id -> the original JSON line (without its newline), in file order."""
    rows: dict[str, str] = {}
    for line in path.read_text(encoding="utf-8").split("\n"):
        if line.strip():
            case_id = json.loads(line)["id"]
            if case_id in rows:
                raise SystemExit(f"{path}: duplicate id {case_id}")
            rows[case_id] = line
    return rows


def write_lines(path: Path, lines: list[str]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(line + "\n" for line in lines), encoding="utf-8")


def main(data_dir: str, split: str = "test") -> None:
    data = Path(data_dir)
    out = OUT[split]
    all_ids = []
    for category in CATEGORIES:
        name = f"BFCL_v4_{category}.json"
        questions = raw_rows(data / name)
        ids = list(questions)
        test = set(random.Random(SEED).sample(ids, min(N, len(ids))))
        if split == "test":
            chosen = test
        else:  # the same test draw, then a second draw from the ids it left: disjoint by construction
            rest = [i for i in ids if i not in test]
            chosen = set(random.Random(VALIDATION_SEED).sample(rest, min(N, len(rest))))
        picked = [i for i in ids if i in chosen]  # original file order
        write_lines(out / name, [questions[i] for i in picked])
        if category not in NO_ANSWER_FILE:
            answers = raw_rows(data / "possible_answer" / name)
            write_lines(out / "possible_answer" / name, [answers[i] for i in picked])
        all_ids += picked
        print(f"{category}: {len(picked)} of {len(ids)}")
    write_lines(out / "ids.txt", all_ids)


if __name__ == "__main__":
    args = sys.argv[1:]
    split = "test"
    if args[1:2] == ["--split"] and len(args) == 3 and args[2] in OUT:
        split = args[2]
    elif len(args) != 1:
        raise SystemExit(f"usage: {sys.argv[0]} PATH/TO/bfcl_eval/data [--split test|validation]")
    main(args[0], split)
