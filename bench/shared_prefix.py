"""Function-call GRPO on SmolLM2-135M-Instruct (CPU): one prefill and one loss pass per distinct prompt
(``trainer.fast_generation=true trainer.shared_prefix=true``) against ao_calib's default path and plain TRL's
GRPOTrainer, on the same model, data, batch and seed.

A function-calling prompt (the function docs, ~300-400 tokens) is much longer than its answer (~20-70 tokens), and
on a CPU a pass costs its tokens: TRL runs each prompt once per completion to sample and again to score the loss.
Every side starts each round from the same adapter and seed, so the rollouts of a step are drawn alike (the fast
path samples what ``generate`` samples for a seed: tests/models/test_fast_generation.py); the mean completion length of
each side's step is printed beside its time to show it. Rounds alternate (bench.report.alternating_medians);
round 0 warms up and is not counted.

    python -m bench.shared_prefix [--rounds 2] [--steps 1] [--prompts 2] [--generations 8] [--new-tokens N]
        [--write BENCHMARKS.md]
"""

from __future__ import annotations

import argparse
from pathlib import Path

from bench.grpo_setup import GRPOBench
from bench.report import alternating_medians, device_name, update_benchmarks

# The preset turns both paths on; the default side turns them off (TRL's sampling and loss pass in ao_calib's trainer)
SIDES = {"shared": ["trainer.fast_generation=true", "trainer.shared_prefix=true"],
         "ao_calib": ["trainer.fast_generation=false", "trainer.shared_prefix=false"]}


def main(argv: list[str] | None = None) -> list[str]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--steps", type=int, default=1, help="optimiser steps per round")
    parser.add_argument("--prompts", type=int, default=2, help="prompts per step (trainer.batch_size)")
    parser.add_argument("--generations", type=int, default=8, help="completions per prompt")
    parser.add_argument("--new-tokens", type=int, default=None, help="max_completion_length (default: the preset's)")
    parser.add_argument("--model", default="smollm2_135m", help="model config (tests use tiny_qwen3)")
    parser.add_argument("--write", type=Path, default=None, help="update this BENCHMARKS.md")
    args = parser.parse_args(argv)

    common = ["experiment=function_call_smollm2", f"model={args.model}", "logger=none", "eval.enabled=false",
              "warmup.enabled=false", "trainer.save_steps=100000", "trainer.logging_steps=1",
              f"trainer.max_steps={args.steps}", f"trainer.batch_size={args.prompts}",
              f"trainer.num_generations={args.generations}", "trainer.temperature=1.0",
              "task.data.generate.n_train=64", "task.data.generate.n_test=4"]
    if args.model == "smollm2_135m":
        common.append("model.source=gguf")
    if args.new_tokens:
        common.append(f"trainer.max_completion_length={args.new_tokens}")
    benches = {name: GRPOBench.compose([*common, *extra]) for name, extra in SIDES.items()}
    lengths: dict[str, list[float]] = {name: [] for name in [*SIDES, "trl"]}

    def recorded(name, build):
        def built(out: Path):
            trainer = build(out)
            train = trainer.train

            def train_and_record(*a, **kw):
                result = train(*a, **kw)
                lengths[name].extend(row["completions/mean_length"] for row in trainer.state.log_history
                                     if "completions/mean_length" in row)
                return result

            trainer.train = train_and_record
            return trainer

        return built

    builders = {name: recorded(name, bench.ao_calib_trainer) for name, bench in benches.items()}
    builders["trl"] = recorded("trl", benches["ao_calib"].plain_trl_trainer)
    medians = alternating_medians(builders, args.rounds, args.steps)
    for name, values in lengths.items():
        print(f"{name}: mean completion length per step {', '.join(f'{v:.1f}' for v in values)}")
    cfg = benches["ao_calib"].cfg
    setting = (f"{args.model}, {args.prompts} prompts x {args.generations} completions, up to "
               f"{cfg.trainer.max_completion_length} new tokens, micro-batch cap "
               f"{cfg.model.get('max_micro_batch_size')}; {args.rounds} alternating rounds x {args.steps} step(s)")
    trl_ms = medians["trl"] * 1000
    table = ["| side | setting | ms per step | vs plain TRL | mean completion length (each round, round 0 first) |",
             "|---|---|---|---|---|"]
    labels = {"shared": "fast_generation + shared_prefix", "ao_calib": "ao_calib default", "trl": "plain TRL"}
    for name in ("shared", "ao_calib", "trl"):
        ms = medians[name] * 1000
        table.append(f"| {labels[name]} | {setting} | {ms:.0f} | {ms / trl_ms:.3f} "
                     f"| {', '.join(f'{v:.1f}' for v in lengths[name])} |")
    print("\n".join(table))
    if args.write:
        update_benchmarks(args.write, "shared_prefix", [*table, "", f"Device: {device_name()}."],
                          command="python -m bench.shared_prefix --write BENCHMARKS.md")
    return table


if __name__ == "__main__":
    main()
