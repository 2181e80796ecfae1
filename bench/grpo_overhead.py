"""ao_calib's GRPO step against a plain TRL GRPOTrainer step on the same tiny model, data, rewards and settings:
``--task function_call`` (the function-calling preset) or ``--task oracle`` (the quickstart's oracle, whose step
injects activations in every pass; the TRL side trains the same prompts without injection).

Rounds alternate between the two trainers in one process, so drift in machine load hits both alike; each round
trains ``--steps`` optimiser steps from a fresh adapter. The median per-step time of each side is compared.

    python -m bench.grpo_overhead [--task function_call|oracle] [--rounds 6] [--steps N] [--write BENCHMARKS.md]
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass
from pathlib import Path

from bench.grpo_setup import GRPOBench
from bench.report import device_name, update_benchmarks


@dataclass(frozen=True)
class Case:
    """One timed comparison: its preset, its default steps, and how its BENCHMARKS.md row is labelled."""

    overrides: tuple[str, ...]
    steps: int
    section: str  # the BENCHMARKS.md block it writes
    label: str  # the name of the ao_calib side (alternating_medians' key and the table's column)
    benchmark: str
    target: str


CASES = {
    "function_call": Case(("experiment=function_call_tiny", "logger=none"), 4, "grpo_overhead", "ao_calib",
                          "GRPO step (function_call)", "<= 1.05"),
    "oracle": Case(("experiment=quickstart", "trainer.beta=0.05", "task.data.generate.n_train_prompts=64",
                    "task.data.generate.n_test_prompts=8"), 3, "oracle_overhead", "oracle (injection)",
                   "oracle GRPO step", "<= 1.10"),
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--task", choices=sorted(CASES), default="function_call")
    parser.add_argument("--rounds", type=int, default=6)
    parser.add_argument("--steps", type=int, default=None, help="steps per round (function_call 4, oracle 3)")
    parser.add_argument("--model", default="tiny_qwen3")
    parser.add_argument("--write", type=Path, default=None, help="update this BENCHMARKS.md")
    args = parser.parse_args()
    case = CASES[args.task]
    steps = args.steps or case.steps

    bench = GRPOBench.compose([*case.overrides, f"model={args.model}", f"trainer.max_steps={steps}",
                               "trainer.save_steps=100000"])
    ours_ms, trl_ms, ratio = bench.time_against_trl(args.rounds, steps, case.label)
    if not args.write:
        return
    t = bench.cfg.trainer
    injected = f", beta {t.beta}, K={bench.cfg.task.activations.k} vectors" if args.task == "oracle" else ""
    update_benchmarks(args.write, case.section, [
        f"| benchmark | setting | {case.label} | plain TRL | ratio | target | device |",
        "|---|---|---|---|---|---|---|",
        f"| {case.benchmark} | {args.model}, {t.batch_size} prompts x {t.num_generations} completions, "
        f"{t.max_completion_length} new tokens{injected}; {args.rounds} alternating rounds x {steps} steps "
        f"| {ours_ms:.0f} ms | {trl_ms:.0f} ms | {ratio:.3f} | {case.target} | {device_name()} |",
    ], command=f"python -m bench.grpo_overhead --task {args.task} --write BENCHMARKS.md")


if __name__ == "__main__":
    main()
