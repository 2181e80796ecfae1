"""Rollout speed: ms per decoded token and tokens/s of each generation mode, the memory-bound limit, peak memory,
and the oracle GRPO step with the fast path against a plain TRL GRPOTrainer step, all in one run.

Modes, each through the steered oracle trainer's own ``_generate_single_turn`` on the same prompts:

* ``trl``: TRL 1.16's default (``generate`` on the unmerged peft model in train mode, compilation disabled);
* ``trl_eval``: the same in eval mode (no dropout);
* ``fast_unmerged``: ``ao_calib.models.fast_generation`` on the unmerged adapter (``generation_merged_copy=false``);
* ``fast_base``: the fast path as it was at ``--baseline`` (a git revision; its ``fast_generation.py`` is imported
  from git and generates from the same merged copy), to measure a change to the path against it;
* ``fast``: the fast path (merged copy; on CUDA a static KV cache and a compiled decode step).

    python -m bench.rollout --shrink                      # tiny shapes on CPU (the CPU table)
    python -m bench.rollout --write BENCHMARKS.md         # GPU: random Qwen3-8B shape, bf16, LoRA 64
    OMP_NUM_THREADS=1 python -m bench.rollout --smollm2   # SmolLM2-135M oracle and function-call rollouts

``--smollm2`` times ``trl``, ``fast_base`` and ``fast`` on the real SmolLM2-135M-Instruct (``model=smollm2_135m``)
with the oracle and function-call experiments' prompts (``--prompts`` x ``--group`` completions, the experiments'
completion lengths and temperatures) and prints each mode's ratio to the baseline and to TRL. Every rollout of a
round starts from the same seed, so the modes sample the same tokens where their distributions agree (the table
says whether ``fast`` wrote exactly what ``fast_base`` wrote).

Rounds alternate the order of the modes; round 0 warms up (and compiles) and is not counted. ms/token is the
rollout's wall time over its decode steps, prefill included. The memory-bound limit is the time to read the
generating model's weights once per token at the GPU's memory bandwidth.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from types import ModuleType

import torch

from bench.full_size import STEP_OVERRIDES, describe, shape_and_overrides
from bench.grpo_setup import ROOT, GRPOBench
from bench.report import device_name, update_benchmarks

MODES = ("trl", "trl_eval", "fast_unmerged", "fast_base", "fast")
SMOLLM2_MODES = ("trl", "fast_base", "fast")
GROUP = 4  # completions per prompt: batch 32 is 8 prompts x 4, batch 128 is 32 x 4
BASELINE = "4c909c2"  # the fast path before one prefill per prompt with the static cache and the sparse stop check
FAST_GENERATION = "ao_calib/models/fast_generation.py"
# Where the file and the modules it imports lived before ao_calib was split into subpackages (a baseline revision
# from before then is read from its old path, its imports pointed at today's homes).
FAST_GENERATION_BEFORE_SUBPACKAGES = "ao_calib/trainers/fast_generation.py"
MODULES_BEFORE_SUBPACKAGES = {"ao_calib.settings": "ao_calib.core.settings",
                              "from ao_calib import distributed": "from ao_calib.runtime import distributed"}
# The experiments --smollm2 takes its prompts and sampling settings from, with a handful of rows each.
SMOLLM2_TASKS = {
    "oracle": ["experiment=oracle_smollm2", "task.data.generate.n_train_prompts=8",
               "task.data.generate.n_validation_prompts=4", "task.data.generate.n_test_prompts=4"],
    "function_call": ["experiment=function_call_smollm2", "task.data.generate.n_train=16",
                      "task.data.generate.n_test=4"],
}
# Peak memory bandwidth of the GPUs this project is lent, by name (TB/s); others take --bandwidth.
BANDWIDTH_TBS = {"H100 80GB HBM3": 3.35, "H100 PCIe": 2.0, "H200": 4.8, "A100-SXM4-80GB": 2.04}


def bandwidth(args) -> float | None:
    if args.bandwidth:
        return args.bandwidth
    if not torch.cuda.is_available():
        return None
    name = torch.cuda.get_device_name(0)
    return next((tbs for key, tbs in BANDWIDTH_TBS.items() if key in name), None)


def weight_bytes(model: torch.nn.Module) -> int:
    seen, total = set(), 0
    for p in model.parameters():
        if p.data_ptr() not in seen:
            seen.add(p.data_ptr())
            total += p.numel() * p.element_size()
    return total


def baseline_module(revision: str) -> ModuleType:
    """``ao_calib.models.fast_generation`` as it was at ``revision`` (read from git), imported under its own name
    next to today's."""
    source = None
    for where in (FAST_GENERATION, FAST_GENERATION_BEFORE_SUBPACKAGES):
        try:
            source = subprocess.run(["git", "-C", str(ROOT), "show", f"{revision}:{where}"], check=True,
                                    capture_output=True, text=True).stdout
            break
        except (OSError, subprocess.CalledProcessError) as exc:
            error = exc
    if source is None:
        raise SystemExit(f"--baseline {revision}: cannot read {FAST_GENERATION} from git ({error}); fast_base needs "
                         "a git checkout with that revision, or leave fast_base out of --modes") from None
    for old, new in MODULES_BEFORE_SUBPACKAGES.items():
        source = re.sub(rf"\b{re.escape(old)}\b", new, source)
    path = Path(tempfile.mkdtemp(prefix="rollout-baseline-")) / f"fast_generation_{revision}.py"
    path.write_text(source)
    spec = importlib.util.spec_from_file_location(f"fast_generation_{revision}", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


class Generators:
    """Each fast mode's generator, built once and kept, so modes can alternate on one trainer: ``fast`` and
    ``fast_base`` share the model's one merged copy; ``fast_unmerged`` generates from the adapter itself."""

    def __init__(self, baseline: str):
        self.baseline = baseline
        self._module: ModuleType | None = None
        self._built: dict[str, tuple] = {}

    def select(self, trainer, mode: str) -> None:
        trainer.fast_generation = mode.startswith("fast")
        if not trainer.fast_generation:
            return
        trainer.generation_merged_copy = mode != "fast_unmerged"
        if mode not in self._built:
            trainer._fast = trainer._merged = None
            trainer._generation_model()
            if mode == "fast_base":
                self._module = self._module or baseline_module(self.baseline)
                trainer._fast = self._module.FastGenerator(trainer._fast.model,
                                                           max_cached_shapes=trainer.fast_generation_cache_shapes)
            self._built[mode] = (trainer._fast, trainer._merged)
        trainer._fast, trainer._merged = self._built[mode]


def rollout(trainer, rows, mode: str, generators: Generators, group: int = GROUP,
            seed: int | None = None) -> tuple[float, list[list[int]]]:
    """Seconds for one rollout of ``rows`` in ``mode`` and its completions (``seed``: drawn from that seed)."""
    generators.select(trainer, mode)
    prompt_ids, _, _ = trainer._tokenize_prompts([r["prompt"] for r in rows])
    trainer._scoring_rows = rows
    trainer.model.train(mode != "trl_eval")
    if seed is not None:
        torch.manual_seed(seed)
    if torch.cuda.is_available():
        torch.cuda.synchronize()
    start = time.perf_counter()
    completions, _ = trainer._generate_single_turn(prompt_ids, None, {}, group)
    if torch.cuda.is_available():
        torch.cuda.synchronize()
    trainer.model.train()
    return time.perf_counter() - start, completions


def run_decode(args, bench: GRPOBench, limit_tbs: float | None) -> list[str]:
    rows_out = []
    generators = Generators(args.baseline)
    with tempfile.TemporaryDirectory() as tmp:
        trainer = bench.ao_calib_trainer(Path(tmp), copy_base=False)
        data = bench.data.train
        for batch in args.batches:
            prompts = [data[i] for i in range(batch // GROUP)]
            rows = [r for r in prompts for _ in range(GROUP)]
            for new_tokens in args.new_tokens:
                trainer.max_completion_length = new_tokens
                trainer.generation_config.max_new_tokens = new_tokens
                trainer.generation_kwargs["max_new_tokens"] = new_tokens
                times: dict[str, list[float]] = {m: [] for m in args.modes}
                steps: dict[str, int] = {}
                peaks: dict[str, float] = {}
                for r in range(args.rounds + 1):
                    for mode in args.modes if r % 2 == 0 else args.modes[::-1]:
                        if torch.cuda.is_available():
                            torch.cuda.reset_peak_memory_stats()
                        seconds, completions = rollout(trainer, rows, mode, generators)
                        n = max(len(c) for c in completions)
                        if torch.cuda.is_available():
                            peaks[mode] = max(peaks.get(mode, 0.0), torch.cuda.max_memory_allocated() / 2**30)
                        if r:
                            times[mode].append(seconds / n)
                            steps[mode] = n
                        print(f"batch {batch} new {new_tokens} round {r} {mode:14s} {seconds / n * 1000:8.2f} "
                              f"ms/token ({n} steps)", flush=True)
                for mode in args.modes:
                    ms = statistics.median(times[mode]) * 1000
                    model = trainer._fast.model if mode.startswith("fast") and trainer._fast else trainer.model
                    limit_ms = weight_bytes(model) / (limit_tbs * 1e12) * 1000 if limit_tbs else None
                    ratio = statistics.median(times[mode]) / statistics.median(times["trl"]) if "trl" in times else 1
                    rows_out.append(
                        f"| {mode} | {batch} | {new_tokens} | {ms:.2f} | {batch * 1000 / ms:.0f} | {ratio:.3f} | "
                        + (f"{limit_ms:.2f} ({ms / limit_ms:.1f}x) | " if limit_ms else "- | ")
                        + (f"{peaks[mode]:.1f} GiB |" if mode in peaks else "- |"))
                    print(rows_out[-1], flush=True)
    return rows_out


def smollm2_trainer(task: str, args, out: Path):
    """A GRPO trainer of ``task``'s SmolLM2 experiment, fast generation on, ``args.prompts`` x ``args.group``
    completions a batch, and the rows of one such batch (each prompt's copies in a row, as TRL lists them)."""
    bench = GRPOBench.compose([*SMOLLM2_TASKS[task], "trainer.fast_generation=true", "trainer.max_steps=1",
                               f"trainer.batch_size={args.prompts}", f"trainer.num_generations={args.group}",
                               "trainer.save_steps=100000"])
    if args.max_new_tokens:
        trainer_cfg = bench.cfg.trainer
        trainer_cfg.max_completion_length = min(trainer_cfg.max_completion_length, args.max_new_tokens)
    data = bench.data.train
    rows = [data[i] for i in range(args.prompts) for _ in range(args.group)]
    return bench.ao_calib_trainer(out, copy_base=False), rows


def run_smollm2(args) -> list[str]:
    """Every mode's rollouts of each SmolLM2 task in alternating rounds, each round's rollouts from one seed; the
    medians and their ratios to ``fast_base`` and to ``trl`` as table rows."""
    rows_out = []
    for task in args.tasks:
        with tempfile.TemporaryDirectory() as tmp:
            trainer, rows = smollm2_trainer(task, args, Path(tmp))
            generators = Generators(args.baseline)
            times: dict[str, list[float]] = {m: [] for m in args.modes}
            tokens: dict[str, list[int]] = {m: [] for m in args.modes}
            same_as_base = []
            prompt_ids, _, _ = trainer._tokenize_prompts([r["prompt"] for r in rows])
            for r in range(args.warmup_rounds + args.rounds):
                written = {}
                for mode in args.modes if r % 2 == 0 else args.modes[::-1]:
                    seconds, written[mode] = rollout(trainer, rows, mode, generators, args.group, seed=1000 + r)
                    steps = max(len(c) for c in written[mode])
                    if r >= args.warmup_rounds:
                        times[mode].append(seconds)
                        tokens[mode].append(steps)
                    print(f"{task} round {r} {mode:10s} {seconds * 1000:9.0f} ms ({steps} steps, "
                          f"load {os.getloadavg()[0]:.1f})", flush=True)
                if "fast" in written and "fast_base" in written:
                    same_as_base.append(written["fast"] == written["fast_base"])
            prompt_len = statistics.mean(len(p) for p in prompt_ids)
            per_token = {m: statistics.median(t / n for t, n in zip(times[m], tokens[m])) for m in args.modes}
            for mode in args.modes:
                ratio = {ref: f"{per_token[mode] / per_token[ref]:.3f}" if ref in per_token else "-"
                         for ref in ("fast_base", "trl")}
                same = ("yes" if all(same_as_base) else "no") if mode == "fast" and same_as_base else "-"
                rows_out.append(
                    f"| {task} | {mode} | {prompt_len:.0f} | {statistics.median(tokens[mode]):.0f} | "
                    f"{statistics.median(times[mode]) * 1000:.0f} | {per_token[mode] * 1000:.1f} | "
                    f"{ratio['fast_base']} | {ratio['trl']} | {same} |")
                print(rows_out[-1], flush=True)
            del trainer
    return rows_out


SMOLLM2_HEADER = ["| task | mode | prompt tokens (mean) | decode steps (median) | ms/rollout | ms/token | "
                  "vs fast_base | vs trl | same tokens as fast_base |", "|---|---|---|---|---|---|---|---|---|"]


def main_smollm2(args, argv) -> list[str]:
    load_before = os.getloadavg()
    print(f"rollout: SmolLM2-135M-Instruct, {args.prompts} prompts x {args.group} completions, "
          f"{torch.get_num_threads()} torch thread(s), baseline {args.baseline}; {device_name()}; "
          f"load average {load_before[0]:.1f}", flush=True)
    rows = run_smollm2(args)
    load_after = os.getloadavg()
    setting = (f"SmolLM2-135M-Instruct (float32), {args.prompts} prompts x {args.group} completions, "
               f"{torch.get_num_threads()} torch thread(s), "
               + (f"completions capped at {args.max_new_tokens} tokens, " if args.max_new_tokens else "")
               + f"{args.rounds} alternating rounds after {args.warmup_rounds} warm-up round(s), "
               f"medians; fast_base: the fast path at {args.baseline}; {device_name()}; load average "
               f"{load_before[0]:.1f} before, {load_after[0]:.1f} after.")
    print("", setting, "", *SMOLLM2_HEADER, *rows, sep="\n", flush=True)
    if args.write:
        command = "python -m bench.rollout " + " ".join(sys.argv[1:] if argv is None else argv)
        update_benchmarks(args.write, "rollout_smollm2_cpu" if not torch.cuda.is_available() else
                          "rollout_smollm2_gpu", [setting, "", *SMOLLM2_HEADER, *rows], command=command)
    return rows


def main(argv: list[str] | None = None) -> list[str]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batches", type=lambda s: [int(x) for x in s.split(",")], default=[32, 128])
    parser.add_argument("--new-tokens", type=lambda s: [int(x) for x in s.split(",")], default=[32, 128])
    parser.add_argument("--modes", type=lambda s: s.split(","), default=None,
                        help=f"default: {','.join(MODES)}; with --smollm2 {','.join(SMOLLM2_MODES)}")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--step-rounds", type=int, default=3, help="alternating rounds of the GRPO step (0: skip)")
    parser.add_argument("--steps", type=int, default=2)
    parser.add_argument("--rank", type=int, default=64, help="LoRA rank (alpha = 2 x rank)")
    parser.add_argument("--layers", type=int, default=None, help="keep this many decoder layers")
    parser.add_argument("--shrink", action="store_true", help="the tiny shapes (the CPU table)")
    parser.add_argument("--bandwidth", type=float, default=None, help="GPU memory bandwidth in TB/s")
    parser.add_argument("--write", type=Path, default=None)
    parser.add_argument("--baseline", default=BASELINE, help="git revision whose fast path fast_base runs")
    parser.add_argument("--smollm2", action="store_true", help="SmolLM2-135M oracle and function-call rollouts: "
                        "trl, fast_base and fast (--modes defaults to these three)")
    parser.add_argument("--tasks", type=lambda s: s.split(","), default=list(SMOLLM2_TASKS), help="with --smollm2")
    parser.add_argument("--prompts", type=int, default=4, help="with --smollm2: distinct prompts per rollout")
    parser.add_argument("--group", type=int, default=8, help="with --smollm2: completions per prompt")
    parser.add_argument("--max-new-tokens", type=int, default=None,
                        help="with --smollm2: cap on every task's completion length (default: each experiment's)")
    parser.add_argument("--warmup-rounds", type=int, default=1, help="with --smollm2: rounds not counted")
    parser.add_argument("--threads", type=int, default=None, help="torch threads (default: torch's own)")
    args = parser.parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    args.modes = args.modes or list(SMOLLM2_MODES if args.smollm2 else MODES)
    if args.smollm2:
        unknown = sorted(set(args.tasks) - set(SMOLLM2_TASKS)) + sorted(set(args.modes) - set(MODES))
        if unknown:
            parser.error(f"unknown --tasks or --modes: {', '.join(unknown)}")
        return main_smollm2(args, argv)
    if "trl" not in args.modes:
        parser.error("--modes must include trl: every ratio is against it")
    on_gpu = torch.cuda.is_available()
    shape, overrides = shape_and_overrides("qwen3_8b", args)
    n_prompts = max(args.batches) // GROUP
    decode_overrides = [*STEP_OVERRIDES, *overrides, f"task.data.generate.n_train_prompts={max(64, n_prompts)}",
                        "trainer.max_steps=1"]
    bench = GRPOBench.compose(decode_overrides, shape=shape)
    setting = describe(shape, bench)
    print(f"rollout: {'tiny' if args.shrink else 'Qwen3-8B'}-shaped, {setting}", flush=True)
    limit = bandwidth(args)
    decode_rows = run_decode(args, bench, limit)

    step_rows = []
    if args.step_rounds:
        del bench
        if on_gpu:
            torch.cuda.empty_cache()
        step = GRPOBench.compose([*STEP_OVERRIDES, *overrides, f"trainer.max_steps={args.steps}",
                                  "trainer.fast_generation=true"], shape=shape)
        fast_ms, trl_ms, ratio = step.time_against_trl(args.step_rounds, args.steps, "oracle_fast")
        step_rows = [f"| oracle GRPO step (fast generation) vs plain TRL GRPOTrainer | {describe(shape, step)}; "
                     f"{args.step_rounds} alternating rounds x {args.steps} steps | {fast_ms:.0f} ms | {trl_ms:.0f} ms "
                     f"| {ratio:.3f} |"]
        print(step_rows[0])
    if args.write:
        command = "python -m bench.rollout " + " ".join(sys.argv[1:] if argv is None else argv)
        section = "rollout_cpu" if not on_gpu else "rollout_gpu"
        update_benchmarks(args.write, section, [
            f"{'tiny' if args.shrink else 'Qwen3-8B'}-shaped, {setting}; {device_name()}"
            + ("; memory-bound limit at %.2f TB/s" % limit if limit else "") + ".", "",
            "| mode | batch | new tokens | ms/token | tokens/s | vs trl | memory-bound limit | peak memory |",
            "|---|---|---|---|---|---|---|---|", *decode_rows, "",
            "| benchmark | setting | ao_calib | plain TRL | ratio |", "|---|---|---|---|---|", *step_rows,
        ], command=command)
    return decode_rows + step_rows


if __name__ == "__main__":
    main()
