"""Each run's step, chosen on the validation split, and what to score once on the test split: for the GRPO runs of
``experiments/grpo_gpu.sh``, which evaluate the validation split every few steps and keep a checkpoint with each.

For every run directory under RUNS it prints ``RUN CHECKPOINT TAG VALUE`` lines: the evaluated step with the
highest ``--metric`` (a dotted path into ``eval_step<N>.json``; ties go to the later step) among those whose
``--guard`` figure is no more than ``--guard-drop`` below the warm-up's (``eval_warmup.json``) and whose checkpoint
was kept, then the warm-up's own checkpoint::

    python -m experiments.gpu_choose RUNS --metric metrics.auroc_within_question --guard metrics.accuracy \
        --warmup-step 200
"""

from __future__ import annotations

import argparse
import json
import math
from pathlib import Path


def figure(report: dict, path: str) -> float | None:
    """The number at a dotted ``path`` of an evaluation report, or None where it is missing or not a number."""
    value = report
    for key in path.split("."):
        if not isinstance(value, dict) or key not in value:
            return None
        value = value[key]
    if not isinstance(value, (int, float)) or math.isnan(value):
        return None
    return float(value)


def choose(run: Path, metric: str, guard: str | None, guard_drop: float) -> tuple[int, Path, float] | None:
    warmup = run / "eval_warmup.json"
    floor = None
    if guard and warmup.is_file():
        base = figure(json.loads(warmup.read_text()), guard)
        floor = None if base is None else base - guard_drop
    best = None
    reports = sorted((int(p.stem.removeprefix("eval_step")), p) for p in run.glob("eval_step*.json"))
    for step, report in reports:
        checkpoint = run / "checkpoints" / f"checkpoint-{step}"
        data = json.loads(report.read_text())
        value = figure(data, metric)
        if value is None or not (checkpoint / "adapter_model.safetensors").is_file():
            continue
        if floor is not None and (figure(data, guard) or 0.0) < floor:
            continue
        if best is None or value >= best[2]:
            best = (step, checkpoint, value)
    return best


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("runs", type=Path)
    parser.add_argument("--metric", required=True, help="dotted path of the figure to maximise")
    parser.add_argument("--guard", default=None, help="dotted path of a figure that may not fall below the warm-up's")
    parser.add_argument("--guard-drop", type=float, default=0.02)
    parser.add_argument("--warmup-step", type=int, required=True, help="the warm-up checkpoint's step")
    args = parser.parse_args()
    for run in sorted(p for p in args.runs.iterdir() if p.is_dir()):
        best = choose(run, args.metric, args.guard, args.guard_drop)
        if best:
            print(run, best[1], f"test_step{best[0]}", f"{best[2]:.3f}")
        warmup = run / "warmup" / "checkpoints" / f"checkpoint-{args.warmup_step}"
        if (warmup / "adapter_model.safetensors").is_file():
            print(run, warmup, "test_warmup", "-")


if __name__ == "__main__":
    main()
