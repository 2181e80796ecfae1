"""Full-size shapes on a GPU, with random weights (no hub): the oracle GRPO step against a plain TRL GRPOTrainer
step on a Qwen3-8B-shaped model (bf16, LoRA rank 64), and the peak GPU memory of oracle GRPO steps on a
Gemma-3-27B-shaped one with gradient checkpointing.

The models are built on the GPU in the real classes (``Qwen3ForCausalLM``, ``Gemma3ForConditionalGeneration``) and
the real text-stack shapes, with the locally trained tokenizer; everything else is what ``task=oracle
model=qwen3_8b|gemma3_27b`` runs (its dtype, attention implementation, LoRA and gradient checkpointing settings).

    python -m bench.full_size step   [--rounds 3] [--steps 2] [--write BENCHMARKS.md]
    python -m bench.full_size memory [--steps 2] [--write BENCHMARKS.md]

``--generation fast|fast_unmerged`` runs the oracle's rollouts on ``trainer.fast_generation`` (with or without its
merged generation copy; the 27B shape has no room for the copy: ``memory`` wants ``fast_unmerged``) instead of
TRL's generate path.

``--layers N`` keeps N decoder layers (a quicker look on a smaller GPU). ``--shrink`` swaps in the tiny shapes, a
smoke test of this script on CPU (what the test suite runs); its numbers mean nothing and ``--write`` refuses them.
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
import tempfile
import time
from pathlib import Path

import torch

from ao_calib.models.config import TinyModelConfig
from bench.grpo_setup import GRPOBench
from bench.report import device_name, update_benchmarks

# The text stacks of the real checkpoints (their config.json / text_config).
SHAPES = {
    "qwen3_8b": TinyModelConfig(family="qwen3", hidden_size=4096, num_hidden_layers=36, num_attention_heads=32,
                                num_key_value_heads=8, head_dim=128, intermediate_size=12288, vocab_size=151936,
                                max_position_embeddings=40960, tie_word_embeddings=False),
    "gemma3_27b": TinyModelConfig(family="gemma3", hidden_size=5376, num_hidden_layers=62, num_attention_heads=32,
                                  num_key_value_heads=16, head_dim=128, intermediate_size=21504, vocab_size=262208,
                                  max_position_embeddings=131072, tie_word_embeddings=True, sliding_window=1024),
}
TINY = {"qwen3_8b": "tiny_qwen3", "gemma3_27b": "tiny_gemma3"}

# One GRPO step: 8 prompts x 4 completions of up to 32 tokens, a KL term against the adapter-free base.
STEP_OVERRIDES = ["task=oracle", "judge=label", "task.activations.cache=false",
                  "task.data.generate.n_train_prompts=64", "task.data.generate.n_test_prompts=8",
                  "trainer.batch_size=8", "trainer.num_generations=4", "trainer.max_completion_length=32",
                  "trainer.beta=0.05", "trainer.save_steps=100000", "trainer.logging_steps=1"]


def shape_and_overrides(model: str, args) -> tuple[TinyModelConfig, list[str]]:
    """The random model's shape and the config overrides that describe it."""
    if args.shrink:
        overrides = [f"model={TINY[model]}"]
        from ao_calib.config.compose import compose_run_config

        tiny = compose_run_config(overrides).model.tiny
        shape = TinyModelConfig(**tiny)
    else:
        # ~recipe: the design-note recipe for task=oracle with these models reads WildChat from the hub; the
        # benchmark runs on the generated test bed (STEP_OVERRIDES), with nothing to download
        overrides, shape = [f"model={model}", "~recipe"], SHAPES[model]
    if args.layers:
        shape = dataclasses.replace(shape, num_hidden_layers=args.layers)
    overrides += [f"model.num_hidden_layers={shape.num_hidden_layers}",
                  f"model.lora.rank={args.rank}", f"model.lora.alpha={2 * args.rank}"]
    return shape, overrides


def generation_overrides(generation: str) -> list[str]:
    """``--generation``: TRL's generate path, or ``trainer.fast_generation`` with or without its merged copy."""
    if generation == "trl":
        return []
    return ["trainer.fast_generation=true", f"trainer.generation_merged_copy={str(generation == 'fast').lower()}"]


def describe(shape: TinyModelConfig, bench: GRPOBench) -> str:
    t, m = bench.cfg.trainer, bench.cfg.model
    params = sum(p.numel() for p in bench.base.parameters()) / 1e9
    return (f"{shape.num_hidden_layers} layers x {shape.hidden_size}, {params:.2f}B params, {m.dtype} "
            f"{m.attn_implementation}, LoRA rank {m.lora.rank}, gradient checkpointing "
            f"{'on' if m.gradient_checkpointing else 'off'}; {t.batch_size} prompts x {t.num_generations} "
            f"completions of up to {t.max_completion_length} tokens, beta {t.beta}")


def run_step(args) -> list[str]:
    shape, overrides = shape_and_overrides("qwen3_8b", args)
    bench = GRPOBench.compose(STEP_OVERRIDES + overrides + generation_overrides(args.generation)
                              + [f"trainer.max_steps={args.steps}"], shape=shape)
    setting = f"{describe(shape, bench)}; oracle generation {args.generation}"
    print(f"step: Qwen3-8B-shaped, {setting}", flush=True)
    oracle_ms, trl_ms, ratio = bench.time_against_trl(args.rounds, args.steps, "oracle")
    return [f"| oracle GRPO step, random Qwen3-8B shape | {setting}; {args.rounds} alternating rounds x "
            f"{args.steps} steps | {oracle_ms:.0f} ms | {trl_ms:.0f} ms | {ratio:.3f} | {device_name()} |"]


def run_memory(args) -> list[str]:
    on_gpu = torch.cuda.is_available()
    if on_gpu:
        torch.cuda.reset_peak_memory_stats()
    shape, overrides = shape_and_overrides("gemma3_27b", args)
    overrides += ["model.gradient_checkpointing=true", f"trainer.max_steps={args.steps}",
                  *generation_overrides(args.generation)]
    bench = GRPOBench.compose(STEP_OVERRIDES + overrides, shape=shape)
    setting = f"{describe(shape, bench)}; generation {args.generation}"
    print(f"memory: Gemma-3-27B-shaped, {setting}", flush=True)
    weights_gib = torch.cuda.memory_allocated() / 2**30 if on_gpu else float("nan")
    with tempfile.TemporaryDirectory() as tmp:
        trainer = bench.ao_calib_trainer(Path(tmp), copy_base=False)  # a 27B model has no room for a copy
        start = time.perf_counter()
        trainer.train()
        step_s = (time.perf_counter() - start) / args.steps
    peak_gib = torch.cuda.max_memory_allocated() / 2**30 if on_gpu else float("nan")
    reserved_gib = torch.cuda.max_memory_reserved() / 2**30 if on_gpu else float("nan")
    total_gib = torch.cuda.get_device_properties(0).total_memory / 2**30 if on_gpu else float("nan")
    print(f"peak allocated {peak_gib:.1f} GiB (reserved {reserved_gib:.1f} GiB) of {total_gib:.1f} GiB; "
          f"weights and activations for the data {weights_gib:.1f} GiB; {step_s:.1f} s/step")
    return [f"| oracle GRPO peak memory, random Gemma-3-27B shape | {setting}; {args.steps} steps | "
            f"{peak_gib:.1f} GiB allocated, {reserved_gib:.1f} GiB reserved, of {total_gib:.0f} GiB "
            f"({step_s:.1f} s/step) | - | - | {device_name()} |"]


def main(argv: list[str] | None = None) -> list[str]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("what", choices=["step", "memory"])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--steps", type=int, default=2)
    parser.add_argument("--rank", type=int, default=64, help="LoRA rank (alpha = 2 x rank)")
    parser.add_argument("--layers", type=int, default=None, help="keep this many decoder layers")
    parser.add_argument("--shrink", action="store_true", help="tiny shapes: a smoke test on CPU")
    parser.add_argument("--generation", choices=["trl", "fast", "fast_unmerged"], default="trl",
                        help="the oracle's rollouts: TRL's generate path or trainer.fast_generation")
    parser.add_argument("--write", type=Path, default=None)
    args = parser.parse_args(argv)
    if args.write and (args.shrink or not torch.cuda.is_available()):
        parser.error("--write records GPU numbers at full shapes: it refuses --shrink and CPU runs")
    rows = run_step(args) if args.what == "step" else run_memory(args)
    if args.write:
        command = "python -m bench.full_size " + " ".join(sys.argv[1:])
        update_benchmarks(args.write, f"full_size_{args.what}", [
            "| benchmark | setting | ao_calib | plain TRL | ratio | device |", "|---|---|---|---|---|---|", *rows,
        ], command=command)
    return rows


if __name__ == "__main__":
    main()
