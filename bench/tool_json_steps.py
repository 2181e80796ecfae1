"""task=tool_json step times: ao_calib's SFT against TRL's SFTTrainer, and ao_calib's PPO against TRL's GRPOTrainer,
the nearest trainer TRL 1.16 has (it has no PPOTrainer): no value head, with as many completions per batch, as many
passes over each batch (num_iterations = ppo_epochs), the same KL coefficient and generation length. The PPO row
is therefore not ao_calib against TRL's PPO: it compares a PPO step (policy, value head, GAE) with a GRPO step.

Rounds alternate between the sides in one process (bench.report.alternating_medians); the tiny model is
random, so completions run to the token limit on both sides.

    python -m bench.tool_json_steps [--rounds 4] [--steps 4] [--write BENCHMARKS.md]
"""

from __future__ import annotations

import argparse
from pathlib import Path

from trl import GRPOConfig, GRPOTrainer, SFTTrainer

from bench.grpo_setup import GRPOBench
from bench.report import alternating_medians, device_name, update_benchmarks
from ao_calib.trainers.common import sampling_kwargs, training_kwargs
from ao_calib.trainers.sft import build_sft_config

COMMON = ["task=tool_json", "reward=tool_json", "task.data.generate.n=400", "logger=none"]
# What the PPO rows' baseline is: TRL 1.16 has no PPOTrainer.
PPO_BASELINE = ("TRL GRPOTrainer (no value head: TRL 1.16 has no PPOTrainer), 4 prompts x 2 completions, "
                "num_iterations 4")


def sft_sides(model: str, steps: int, extra: tuple[str, ...] | list[str] = ()) -> tuple[GRPOBench, dict]:
    bench = GRPOBench.compose([*COMMON, f"model={model}", "trainer=sft", f"trainer.max_steps={steps}",
                               "trainer.batch_size=8", "trainer.max_length=448", "trainer.save_steps=100000",
                               "trainer.logging_steps=1", "trainer.lr=1e-4", *extra])

    def plain(out: Path):
        # TRL's own prompt-completion path: it applies the chat template and masks the prompt itself.
        rows = bench.data.train.map(lambda r: {"completion": [{"role": "assistant", "content": r["completion"]}]})
        rows = rows.select_columns(["prompt", "completion"])
        return SFTTrainer(model=bench.fresh_model(), args=build_sft_config(bench.setup(out), bench.cfg.trainer),
                          train_dataset=rows, processing_class=bench.tokenizer)

    return bench, {"ao_calib": bench.ao_calib_trainer, "trl": plain}


def ppo_sides(model: str, steps: int, extra: tuple[str, ...] | list[str] = ()) -> tuple[GRPOBench, dict]:
    bench = GRPOBench.compose([*COMMON, f"model={model}", "trainer=ppo", f"trainer.max_steps={steps}",
                               "trainer.batch_size=8", "trainer.ppo_epochs=4", "trainer.max_completion_length=64",
                               "trainer.save_steps=100000", "trainer.logging_steps=1", "eval.enabled=false", *extra])
    t = bench.cfg.trainer

    def plain(out: Path):
        # The same TrainingArguments and sampling fields as ao_calib's side; only the algorithm differs.
        setup = bench.setup(out)
        args = GRPOConfig(**training_kwargs(setup, t, "train"), **sampling_kwargs(setup, t),
                          per_device_train_batch_size=t.batch_size, num_generations=2, num_iterations=t.ppo_epochs,
                          beta=t.kl_coef)
        return GRPOTrainer(model=bench.fresh_model(), args=args, train_dataset=bench.data.train,
                           reward_funcs=[bench.reward_fns[n] for n in bench.schedule.names],
                           processing_class=bench.tokenizer)

    return bench, {"ao_calib": bench.ao_calib_trainer, "trl": plain}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--steps", type=int, default=4, help="optimiser steps per round (a multiple of 4 for PPO)")
    parser.add_argument("--model", default="tiny_qwen3")
    parser.add_argument("--write", type=Path, default=None, help="update this BENCHMARKS.md")
    args = parser.parse_args()

    table = ["| benchmark | setting | ao_calib | TRL baseline (named in the setting) | ratio | device |",
             "|---|---|---|---|---|---|"]
    for name, sides, setting, baseline in [
        ("SFT step", sft_sides, "batch 8, max length 448", "TRL SFTTrainer, prompt-completion rows"),
        ("PPO step", ppo_sides, "8 rollouts x 64 new tokens, 4 PPO epochs per batch",
         PPO_BASELINE),
    ]:
        _, builders = sides(args.model, args.steps)
        medians = alternating_medians(builders, args.rounds, args.steps)
        ours, trl = medians["ao_calib"] * 1000, medians["trl"] * 1000
        print(f"{name}: ao_calib {ours:.0f} ms, TRL baseline {trl:.0f} ms, ratio {ours / trl:.3f}", flush=True)
        table.append(f"| {name} (tool_json) | {args.model}, {setting}; baseline: {baseline}; {args.rounds} alternating "
                     f"rounds x {args.steps} steps | {ours:.0f} ms | {trl:.0f} ms | {ours / trl:.3f} | {device_name()} |")
    if args.write:
        update_benchmarks(args.write, "tool_json_steps", table,
                          command=f"python -m bench.tool_json_steps --rounds {args.rounds} --steps {args.steps} "
                                  f"--model {args.model} --write BENCHMARKS.md")


if __name__ == "__main__":
    main()
