"""Rollout speed: ms per decoded token and tokens/s of each generation mode, the memory-bound limit, peak memory,
and the oracle GRPO step with the fast path against a plain TRL GRPOTrainer step, all in one run.

Modes, each through the steered oracle trainer's own ``_generate_single_turn`` on the same prompts:

* ``trl``: TRL 1.16's default (``generate`` on the unmerged peft model in train mode, compilation disabled);
* ``trl_eval``: the same in eval mode (no dropout);
* ``fast_unmerged``: ``ao_calib.trainers.fast_generation`` on the unmerged adapter (``generation_merged_copy=false``);
* ``fast``: the fast path (merged copy; on CUDA a static KV cache and a compiled decode step).

    python -m bench.rollout --shrink                      # tiny shapes on CPU (the CPU table)
    python -m bench.rollout --write BENCHMARKS.md         # GPU: random Qwen3-8B shape, bf16, LoRA 64

Rounds alternate the order of the modes; round 0 warms up (and compiles) and is not counted. ms/token is the
rollout's wall time over its decode steps, prefill included. The memory-bound limit is the time to read the
generating model's weights once per token at the GPU's memory bandwidth.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

import torch

from bench.full_size import STEP_OVERRIDES, describe, shape_and_overrides
from bench.grpo_setup import GRPOBench
from bench.report import device_name, update_benchmarks

MODES = ("trl", "trl_eval", "fast_unmerged", "fast")
GROUP = 4  # completions per prompt: batch 32 is 8 prompts x 4, batch 128 is 32 x 4
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


def rollout(trainer, rows, mode: str) -> tuple[float, int]:
    """Seconds for one rollout of ``rows`` in ``mode`` and its number of decode steps."""
    trainer.fast_generation = mode.startswith("fast")
    trainer.generation_merged_copy = mode == "fast"
    if trainer._fast is not None and (trainer._merged is not None) != trainer.generation_merged_copy:
        trainer._fast = trainer._merged = None  # rebuilt for the other kind
    prompt_ids, _, _ = trainer._tokenize_prompts([r["prompt"] for r in rows])
    trainer._scoring_rows = rows
    trainer.model.train(mode != "trl_eval")
    if torch.cuda.is_available():
        torch.cuda.synchronize()
    start = time.perf_counter()
    completions, _ = trainer._generate_single_turn(prompt_ids, None, {}, GROUP)
    if torch.cuda.is_available():
        torch.cuda.synchronize()
    trainer.model.train()
    return time.perf_counter() - start, max(len(c) for c in completions)


def run_decode(args, bench: GRPOBench, limit_tbs: float | None) -> list[str]:
    rows_out = []
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
                        seconds, n = rollout(trainer, rows, mode)
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


def main(argv: list[str] | None = None) -> list[str]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batches", type=lambda s: [int(x) for x in s.split(",")], default=[32, 128])
    parser.add_argument("--new-tokens", type=lambda s: [int(x) for x in s.split(",")], default=[32, 128])
    parser.add_argument("--modes", type=lambda s: s.split(","), default=list(MODES))
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--step-rounds", type=int, default=3, help="alternating rounds of the GRPO step (0: skip)")
    parser.add_argument("--steps", type=int, default=2)
    parser.add_argument("--rank", type=int, default=64, help="LoRA rank (alpha = 2 x rank)")
    parser.add_argument("--layers", type=int, default=None, help="keep this many decoder layers")
    parser.add_argument("--shrink", action="store_true", help="the tiny shapes (the CPU table)")
    parser.add_argument("--bandwidth", type=float, default=None, help="GPU memory bandwidth in TB/s")
    parser.add_argument("--write", type=Path, default=None)
    args = parser.parse_args(argv)
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
