"""ao_calib's GRPO step against a plain TRL GRPOTrainer step: same tiny model, data, rewards and settings.

Rounds alternate between the two trainers in one process, so drift in machine load hits both alike; each round
trains ``--steps`` optimiser steps from a fresh adapter. The median per-step time of each side is compared.

    python -m bench.grpo_overhead [--rounds 6] [--steps 4] [--write BENCHMARKS.md]
"""

from __future__ import annotations

import argparse
from pathlib import Path

from bench.grpo_setup import GRPOBench
from bench.report import device_name, update_benchmarks


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=6)
    parser.add_argument("--steps", type=int, default=4)
    parser.add_argument("--model", default="tiny_qwen3")
    parser.add_argument("--write", type=Path, default=None, help="update this BENCHMARKS.md")
    args = parser.parse_args()

    overrides = ["experiment=function_call_tiny", f"model={args.model}", f"trainer.max_steps={args.steps}",
                 "trainer.save_steps=100000", "logger=none"]
    bench = GRPOBench.compose(overrides)
    cfg = bench.cfg
    ours_ms, trl_ms, ratio = bench.time_against_trl(args.rounds, args.steps, "ao_calib")
    if args.write:
        t = cfg.trainer
        update_benchmarks(args.write, "grpo_overhead", [
            "| benchmark | setting | ao_calib | plain TRL | ratio | target | device |",
            "|---|---|---|---|---|---|---|",
            f"| GRPO step (function_call) | {args.model}, {t.batch_size} prompts x {t.num_generations} completions,"
            f" {t.max_completion_length} new tokens, {args.rounds} alternating rounds x {args.steps} steps"
            f" | {ours_ms:.0f} ms | {trl_ms:.0f} ms | {ratio:.3f} | <= 1.05 | {device_name()} |",
        ], command="python -m bench.grpo_overhead --write BENCHMARKS.md")


if __name__ == "__main__":
    main()
