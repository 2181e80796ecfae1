"""Oracle GRPO step (activations injected in every pass) against a plain TRL GRPOTrainer step on the same model,
data, reward and settings without injection. Rounds alternate in one process; medians per step are compared.

    python -m bench.oracle_overhead [--rounds 6] [--steps 3] [--write BENCHMARKS.md]
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
    parser.add_argument("--steps", type=int, default=3)
    parser.add_argument("--write", type=Path, default=None)
    args = parser.parse_args()
    overrides = ["experiment=quickstart", f"trainer.max_steps={args.steps}", "trainer.save_steps=100000",
                 "trainer.beta=0.05", "task.data.generate.n_train_prompts=64", "task.data.generate.n_test_prompts=8"]
    with initialize_config_dir(config_dir=str(ROOT / "conf"), version_base="1.3"):
        cfg = compose("config", overrides=overrides)
    task = get_task(cfg)
    source = models.model_source(cfg.model, cfg.paths.cache_dir)
    tokenizer = models.load_tokenizer(source)
    base = models.load_base_model(cfg.model, source)
    data = task.build_data(tokenizer, models.attach_lora(copy.deepcopy(base), cfg.model, cfg.trainer))
    reward_fns = task.reward_functions()
    schedule = build_reward_schedule(cfg.reward, reward_fns)

    def fresh():
        return models.attach_lora(copy.deepcopy(base), cfg.model, cfg.trainer)

    def oracle(out: Path):
        return build_trainer(cfg, cfg.trainer, fresh(), tokenizer, data, schedule, reward_fns, out,
                             steering=task.steering())

    def plain(out: Path):
        return GRPOTrainer(model=fresh(), reward_funcs=[reward_fns[n] for n in schedule.names],
                           args=build_grpo_config(cfg, cfg.trainer, out / "checkpoints", schedule.weights_at(0)),
                           train_dataset=data.train, processing_class=tokenizer)

    medians = alternating_medians({"oracle": oracle, "trl": plain}, args.rounds, args.steps)
    oracle_ms, trl_ms = medians["oracle"] * 1000, medians["trl"] * 1000
    ratio = oracle_ms / trl_ms
    print(f"median: oracle {oracle_ms:.1f} ms/step, plain TRL {trl_ms:.1f} ms/step, ratio {ratio:.3f}")
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
