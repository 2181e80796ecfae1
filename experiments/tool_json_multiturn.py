"""The bars of `experiment=tool_json_smollm2_multiturn`, recomputed from prediction rows (not read off eval.json):
its runs (one per seed) beside the single-turn preset's runs (`experiment=tool_json_smollm2`, same seeds, same
held-out rows):

    python -m experiments.tool_json_multiturn --multi RUN_S0 RUN_S1 RUN_S2 --single RUN_S0 RUN_S1 RUN_S2

A GRPO run started from another run's warm-up adapter (`warmup.enabled=false trainer.init_from=...`) takes that
run's warm-up rows as its baseline: `--warmup RUN_S0 RUN_S1 RUN_S2`, in the order of `--multi`.

Figures, each the mean over the runs with every run's value beside it:
- calculator rows: the multi-turn final answer right (tools run), the same with tools that return nothing (the
  control), and the single-turn preset's answer accuracy on those rows (``args_reward``: its one message, a call
  with the right arguments or a right answer), and how often that message is a final answer that is right;
- all rows: the multi-turn final answer after GRPO and after its SFT warm-up;
- rows that need no tool: the share of episodes that call one.
"""

from __future__ import annotations

import argparse
import json
import math
from pathlib import Path

from ao_calib.core.io import read_jsonl
from ao_calib.runs.run_dir import RunDir

WARMUP = "warmup"


def rows_of(run: Path, tag: str = RunDir.FINAL, variant: str | None = None) -> list[dict]:
    return [row for _, row in read_jsonl(RunDir(run).predictions(tag, variant), "prediction rows")]


def share(rows: list[dict], value) -> float:
    """The mean of ``value(row)`` over ``rows`` (nan for none)."""
    return sum(value(r) for r in rows) / len(rows) if rows else float("nan")


def single_final_right(row: dict) -> float:
    """The single-turn message is a final answer (not a call) and right."""
    try:
        message = json.loads(row["completion"])
    except (json.JSONDecodeError, TypeError):
        return 0.0
    return float(isinstance(message, dict) and "final" in message and row["scores"].get("args_reward", 0.0) == 1.0)


def multi_figures(run: Path, warmup_run: Path | None = None) -> dict[str, float]:
    final, silent = rows_of(run), rows_of(run, RunDir.FINAL, "silent_tools")
    warmup = rows_of(warmup_run or run, WARMUP)
    calculator = [r for r in final if r.get("category") == "calculator"]
    return {
        "calculator: final answer right": share(calculator, lambda r: r["scores"]["answer_correct"]),
        "calculator: with silent tools": share([r for r in silent if r.get("category") == "calculator"],
                                               lambda r: r["scores"]["answer_correct"]),
        "all rows: after GRPO": share(final, lambda r: r["scores"]["answer_correct"]),
        "all rows: after the warm-up": share(warmup, lambda r: r["scores"]["answer_correct"]),
        "no-tool rows: call rate": share([r for r in final if not r.get("tool_needed")],
                                         lambda r: r["scores"]["called"]),
        "calls per episode": share(final, lambda r: r["scores"]["tool_calls"]),
        "rows": len(final),
    }


def single_figures(run: Path) -> dict[str, float]:
    calculator = [r for r in rows_of(run) if r.get("category") == "calculator"]
    return {"calculator: single-turn answer accuracy (args_reward)": share(calculator,
                                                                           lambda r: r["scores"]["args_reward"]),
            "calculator: single-turn final answer right": share(calculator, single_final_right)}


def mean(values: list[float]) -> float:
    kept = [v for v in values if not math.isnan(v)]
    return sum(kept) / len(kept) if kept else float("nan")


def cell(values: list[float]) -> str:
    return f"{mean(values):.3f} ({', '.join(f'{v:.3f}' for v in values)})"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--multi", nargs="+", type=Path, required=True, help="multi-turn runs, one per seed")
    parser.add_argument("--single", nargs="*", type=Path, default=[], help="single-turn runs, the same seeds")
    parser.add_argument("--warmup", nargs="*", type=Path, default=[],
                        help="the runs whose warm-up each --multi run's GRPO started from (default: the same runs)")
    args = parser.parse_args(argv)
    if args.warmup and len(args.warmup) != len(args.multi):
        parser.error(f"--warmup names {len(args.warmup)} runs for {len(args.multi)} --multi runs")
    multi = [multi_figures(run, warm) for run, warm in zip(args.multi, args.warmup or [None] * len(args.multi))]
    single = [single_figures(run) for run in args.single]
    lines = ["| figure | mean (each run) |", "|---|---|"]
    for name in multi[0]:
        lines.append(f"| {name} | {cell([m[name] for m in multi])} |")
    for name in (single[0] if single else {}):
        lines.append(f"| {name} | {cell([s[name] for s in single])} |")
    if single:
        gain = mean([m["calculator: final answer right"] for m in multi]) - mean(
            [s["calculator: single-turn answer accuracy (args_reward)"] for s in single])
        lines.append(f"| calculator: multi-turn minus single-turn (bar +0.15) | {gain:+.3f} |")
    drop = mean([m["all rows: after GRPO"] - m["all rows: after the warm-up"] for m in multi])
    lines.append(f"| all rows: GRPO minus warm-up (bar >= -0.01) | {drop:+.3f} |")
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
