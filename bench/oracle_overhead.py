"""Oracle GRPO step (activations injected in every pass) against a plain TRL GRPOTrainer step on the same model,
data, reward and settings without injection. Rounds alternate in one process; medians per step are compared.

    python -m bench.oracle_overhead [--rounds 6] [--steps 3] [--write BENCHMARKS.md]
"""

from __future__ import annotations

import argparse
from pathlib import Path

from bench.grpo_setup import GRPOBench
from bench.report import device_name, update_benchmarks


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=6)
    parser.add_argument("--steps", type=int, default=3)
    parser.add_argument("--write", type=Path, default=None)
    args = parser.parse_args()
    overrides = ["experiment=quickstart", f"trainer.max_steps={args.steps}", "trainer.save_steps=100000",
                 "trainer.beta=0.05", "task.data.generate.n_train_prompts=64", "task.data.generate.n_test_prompts=8"]
    bench = GRPOBench.compose(overrides)
    cfg = bench.cfg
    oracle_ms, trl_ms, ratio = bench.time_against_trl(args.rounds, args.steps, "oracle")
    if args.write:
        t = cfg.trainer
        update_benchmarks(args.write, "oracle_overhead", [
            "| benchmark | setting | oracle (injection) | plain TRL | ratio | target | device |",
            "|---|---|---|---|---|---|---|",
            f"| oracle GRPO step | tiny_qwen3, {t.batch_size} prompts x {t.num_generations} completions, "
            f"{t.max_completion_length} new tokens, beta {t.beta}, K={cfg.task.activations.k} vectors; "
            f"{args.rounds} alternating rounds x {args.steps} steps | {oracle_ms:.0f} ms | {trl_ms:.0f} ms "
            f"| {ratio:.3f} | <= 1.10 | {device_name()} |",
        ], command="python -m bench.oracle_overhead --write BENCHMARKS.md")


if __name__ == "__main__":
    main()
