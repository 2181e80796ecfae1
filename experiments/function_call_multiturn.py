"""The bars of `experiment=function_call_smollm2_multiturn`, recomputed from prediction rows (not read off eval.json),
one run per seed:

    python -m experiments.function_call_multiturn RUN_S0 RUN_S1 RUN_S2

For each stage (zero-shot, after the warm-up, after GRPO), the mean over the runs with every run's value beside it:
per-turn success and whole episodes on the held-out generated cases, failing calls an episode, and BFCL v4's cases
that every evaluation also plays (the `_extra` rows: a case passes when every turn does), with their count.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from experiments.tool_json_multiturn import cell, mean, rows_of, share

STAGES = {"zero-shot": "initial", "warm-up": "warmup", "GRPO": "final"}


def stage_figures(run: Path, tag: str) -> dict[str, float]:
    generated, bfcl = rows_of(run, tag), rows_of(run, tag, "extra")
    return {
        "generated: per-turn success": share(generated, lambda r: r["scores"]["turns_passed"]),
        "generated: whole episodes": share(generated, lambda r: r["scores"]["bfcl_ast"]),
        "generated: failing calls an episode": share(generated, lambda r: r["scores"]["tool_errors"]),
        "generated: cases": len(generated),
        "BFCL: cases passed": share(bfcl, lambda r: r["scores"]["bfcl_ast"]),
        "BFCL: per-turn success": share(bfcl, lambda r: r["scores"]["turns_passed"]),
        "BFCL: cases": len(bfcl),
        "BFCL: categories": ", ".join(sorted({r.get("kind", "?") for r in bfcl})),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("runs", nargs="+", type=Path, help="runs of the preset, one per seed")
    args = parser.parse_args(argv)
    figures = {stage: [stage_figures(run, tag) for run in args.runs] for stage, tag in STAGES.items()}
    lines = ["| figure | " + " | ".join(STAGES) + " |", "|---|" + "---|" * len(STAGES)]
    for name in figures["GRPO"][0]:
        cells = []
        for stage in STAGES:
            values = [f[name] for f in figures[stage]]
            # counts and category names are not averaged: their distinct values over the runs are listed
            listed = isinstance(values[0], (str, int))
            cells.append(", ".join(sorted(set(map(str, values)))) if listed else cell(values))
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    turn = {stage: mean([f["generated: per-turn success"] for f in figures[stage]]) for stage in STAGES}
    lines.append(f"| per-turn: warm-up minus zero-shot (bar >= +0.30) | {turn['warm-up'] - turn['zero-shot']:+.3f} |")
    lines.append(f"| per-turn: GRPO minus warm-up (bar >= -0.01) | {turn['GRPO'] - turn['warm-up']:+.3f} |")
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
