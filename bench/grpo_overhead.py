"""ao_calib's GRPO step against a plain TRL GRPOTrainer step: same tiny model, data, rewards and settings.

Rounds alternate between the two trainers in one process, so drift in machine load hits both alike; each round
trains ``--steps`` optimiser steps from a fresh adapter. The median per-step time of each side is compared.

    python -m bench.grpo_overhead [--rounds 6] [--steps 4] [--write BENCHMARKS.md]
"""

from __future__ import annotations

import argparse
import copy
from pathlib import Path

from hydra import compose, initialize_config_dir
from trl import GRPOTrainer

from ao_calib import models
from ao_calib.rewards import build_reward_schedule
from ao_calib.task_api import get_task
from ao_calib.trainers import build_trainer
from ao_calib.trainers.grpo import build_grpo_config
from bench.report import alternating_medians, device_name, update_benchmarks

ROOT = Path(__file__).resolve().parent.parent


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=6)
    parser.add_argument("--steps", type=int, default=4)
    parser.add_argument("--model", default="tiny_qwen3")
    parser.add_argument("--write", type=Path, default=None, help="update this BENCHMARKS.md")
    args = parser.parse_args()

    overrides = ["experiment=function_call_tiny", f"model={args.model}", f"trainer.max_steps={args.steps}",
                 "trainer.save_steps=100000", "logger=none"]
    with initialize_config_dir(config_dir=str(ROOT / "conf"), version_base="1.3"):
        cfg = compose("config", overrides=overrides)
    task = get_task(cfg)
    source = models.model_source(cfg.model, cfg.paths.cache_dir)
    tokenizer = models.load_tokenizer(source)
    base = models.load_base_model(cfg.model, source)
    data = task.build_data(tokenizer, base)
    reward_fns = task.reward_functions()
    schedule = build_reward_schedule(cfg.reward, reward_fns)

    def ours(out: Path):
        model = models.attach_lora(copy.deepcopy(base), cfg.model, cfg.trainer)
        return build_trainer(cfg, cfg.trainer, model, tokenizer, data, schedule, reward_fns, out)

    def plain(out: Path):
        model = models.attach_lora(copy.deepcopy(base), cfg.model, cfg.trainer)
        return GRPOTrainer(model=model, reward_funcs=[reward_fns[n] for n in schedule.names],
                           args=build_grpo_config(cfg, cfg.trainer, out / "checkpoints", schedule.weights_at(0)),
                           train_dataset=data.train, processing_class=tokenizer)

    medians = alternating_medians({"ao_calib": ours, "trl": plain}, args.rounds, args.steps)
    ours_ms, trl_ms = medians["ao_calib"] * 1000, medians["trl"] * 1000
    ratio = ours_ms / trl_ms
    print(f"median: ao_calib {ours_ms:.1f} ms/step, plain TRL {trl_ms:.1f} ms/step, ratio {ratio:.3f}")
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
