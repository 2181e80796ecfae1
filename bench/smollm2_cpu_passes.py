"""Two costs of `experiment=function_call_smollm2` on a CPU, each measured against the alternative in alternating
rounds in one process (bench.report.alternating_rounds):

- the warm-up's SFT step with its 4 examples in one padded pass (`warmup.micro_batch_size=4`, the model's cap)
  against one example a pass, accumulated (`warmup.micro_batch_size=1`): the same optimiser step, so the logged
  losses must agree; function_call_smollm2's cases run from about 330 to 800 tokens, so a padded pass computes on
  padding and needs a masked attention (tool_json_smollm2's warm-up, whose rows vary less, is measured beside it);
- an evaluation's generation (greedy, the preset's 192 new tokens, batches of 16) from the unmerged LoRA adapter
  (`eval.merged_copy=false`) against the merged copy (`eval.merged_copy=true`, the default): the completions must
  agree.

The evaluation rows are the preset's real BFCL validation cases (`data/bfcl_v4_real_validation`, drawn with
`eval.seed`), answered by a fresh adapter (the base model's own answers: prose, as at the zero-shot evaluation) or
by a trained one (`--adapter RUN/warmup/checkpoints/checkpoint-120`: short calls, as after the warm-up).

    python -m bench.smollm2_cpu_passes [--rounds 2] [--steps 4] [--rows 32] [--adapter DIR] [--write BENCHMARKS.md]
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable
from pathlib import Path

import torch
from omegaconf import OmegaConf, open_dict

from ao_calib.evaluation.evaluate import held_out_rows
from ao_calib.evaluation.generation import generate_completions
from ao_calib.models import loading as models
from ao_calib.models.merged_copy import merged_copy_of
from ao_calib.trainers import build_trainer
from bench.grpo_setup import ROOT, GRPOBench
from bench.report import (
    alternating_medians,
    alternating_rounds,
    device_name,
    update_benchmarks,
)

PRESETS = ("function_call_smollm2", "tool_json_smollm2")


def compose(preset: str) -> GRPOBench:
    return GRPOBench.compose([f"experiment={preset}", "logger=none", "trainer.seed=1"])


def warmup_sides(bench: GRPOBench, steps: int) -> tuple[dict, dict[str, list[list[float]]]]:
    """Builders of the warm-up trainer at micro-batch 4 and 1, and the losses each logs (per round, per step)."""
    losses: dict[str, list[list[float]]] = {}

    def side(micro: int):
        stage = OmegaConf.create(OmegaConf.to_container(bench.cfg.warmup, resolve=True))
        with open_dict(stage):
            stage.max_steps, stage.logging_steps, stage.save_steps, stage.micro_batch_size = steps, 1, 100000, micro

        def build(out: Path):
            trainer = build_trainer(bench.setup(out), stage, "warmup")
            train = trainer.train

            def train_and_record(*args, **kwargs):
                result = train(*args, **kwargs)
                losses.setdefault(f"micro {micro}", []).append(
                    [row["loss"] for row in trainer.state.log_history if "loss" in row])
                return result

            trainer.train = train_and_record
            return trainer

        return build

    return {"micro 4 (padded)": side(4), "micro 1 (accumulated)": side(1)}, losses


def generation_sides(bench: GRPOBench, rows: list[dict], adapter: str | None) -> tuple[dict, dict[str, list[str]]]:
    """Callables that generate the rows from the unmerged adapter and from the merged copy (the copy refreshed
    inside the timing, as an evaluation does), each returning its seconds, and their outputs."""
    if adapter:
        source = models.model_source(bench.cfg.model, bench.cfg.paths.cache_dir)
        model = models.load_trained_model(bench.cfg.model, source, adapter)
    else:
        model = bench.fresh_model(copy_base=False)
    kwargs = {"chat_template_kwargs": OmegaConf.to_container(bench.cfg.model.chat_template_kwargs, resolve=True),
              "max_new_tokens": bench.cfg.eval.max_new_tokens, "batch_size": bench.cfg.eval.batch_size}
    outputs: dict[str, list[str]] = {}

    def timed(name: str, generation_model) -> Callable[[], float]:
        def run() -> float:
            start = time.perf_counter()
            outputs[name] = generate_completions(generation_model(), bench.tokenizer, rows, desc=name, **kwargs)
            return time.perf_counter() - start
        return run

    return {"unmerged adapter": timed("unmerged", lambda: model),
            "merged copy": timed("merged", lambda: merged_copy_of(model).model)}, outputs


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=2, help="counted rounds per benchmark (plus one warm-up)")
    parser.add_argument("--steps", type=int, default=4, help="warm-up optimiser steps per round")
    parser.add_argument("--rows", type=int, default=32, help="real validation cases generated per round")
    parser.add_argument("--adapter", default=None, help="a trained adapter for the generation benchmark")
    parser.add_argument("--only", default="warmup,generation", help="comma-separated: warmup, generation")
    parser.add_argument("--write", type=Path, default=None, help="update this BENCHMARKS.md")
    args = parser.parse_args()
    only = set(args.only.split(","))
    table = ["| benchmark | setting | alternative | micro-batch 1 / merged copy | ratio | agreement |",
             "|---|---|---|---|---|---|"]
    if "warmup" in only:
        for preset in PRESETS:
            bench = compose(preset)
            sides, losses = warmup_sides(bench, args.steps)
            medians = alternating_medians(sides, args.rounds, args.steps)
            slow, fast = medians["micro 4 (padded)"], medians["micro 1 (accumulated)"]
            a, b = losses["micro 4"][-1], losses["micro 1"][-1]
            gap = max(abs(x - y) for x, y in zip(a, b))
            table.append(f"| warm-up SFT step | {preset}, batch {bench.cfg.warmup.batch_size}, {args.steps} steps a "
                         f"round, {args.rounds} counted rounds | {slow * 1000:.0f} ms (micro-batch 4, padded) | "
                         f"{fast * 1000:.0f} ms (micro-batch 1, accumulated) | {fast / slow:.3f} | "
                         f"largest loss difference {gap:.1e} over {len(a)} steps |")
            del bench, sides
    if "generation" in only:
        bench = compose(PRESETS[0])
        folder = ROOT / "data" / "bfcl_v4_real_validation"
        with open_dict(bench.cfg):
            bench.cfg.task.data.test_path, bench.cfg.task.data.eval_split = str(folder), "test"
            bench.cfg.task.data.extra_test_path = None
        from ao_calib.task_api import build_task

        data = build_task(bench.cfg).build_data(bench.tokenizer, bench.base)
        rows = held_out_rows(data.test, args.rows, bench.cfg.eval.seed)
        calls, outputs = generation_sides(bench, rows, args.adapter)
        medians = alternating_rounds(calls, args.rounds)
        same = sum(x == y for x, y in zip(outputs["unmerged"], outputs["merged"]))
        answered_by = f"adapter {args.adapter}" if args.adapter else "a fresh adapter (the base model's answers)"
        table.append(f"| evaluation generation | {len(rows)} real BFCL validation cases, {answered_by}, greedy, "
                     f"{bench.cfg.eval.max_new_tokens} new tokens, batches of {bench.cfg.eval.batch_size} | "
                     f"{medians['unmerged adapter']:.1f} s (unmerged adapter) | {medians['merged copy']:.1f} s "
                     f"(merged copy) | {medians['merged copy'] / medians['unmerged adapter']:.3f} | "
                     f"{same} of {len(rows)} completions identical |")
    print("\n".join(table))
    print(f"device: {device_name()}")
    if args.write:
        command = "python -m bench.smollm2_cpu_passes " + " ".join(
            f"--{k.replace('_', '-')} {v}" for k, v in vars(args).items() if k != "write" and v is not None)
        footer = f"Device: {device_name()}; torch {torch.__version__}."
        update_benchmarks(args.write, "smollm2_cpu_passes", [*table, "", footer], command + " --write BENCHMARKS.md")


if __name__ == "__main__":
    main()
