"""Activation extraction (forward pass stopped after the deepest needed layer) against a full forward pass of the
same batches, and a cached rerun against the first extraction.

    python -m bench.activations [--prompts 256] [--layers 12] [--hidden 256] [--write BENCHMARKS.md]
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

import torch

from ao_calib.models.loading import load_tokenizer
from ao_calib.models.tiny.builder import TinyModelSpec, ensure_tiny_model
from ao_calib.steering.activations import (ActivationCache, ExtractionStats, PositionRule, extract_activations,
                                  layer_indices, target_text)
from bench.report import device_name, update_benchmarks
from ao_calib_tasks.oracle.rows.generate import generate_rows


def timed(fn, repeats: int) -> float:
    samples = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        samples.append(time.perf_counter() - start)
    return statistics.median(samples)


@torch.no_grad()
def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--prompts", type=int, default=256)
    parser.add_argument("--layers", type=int, default=12)
    parser.add_argument("--hidden", type=int, default=256)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--write", type=Path, default=None)
    args = parser.parse_args()
    from transformers import AutoModelForCausalLM

    with tempfile.TemporaryDirectory() as tmp:
        spec = TinyModelSpec(family="qwen3", hidden_size=args.hidden, num_hidden_layers=args.layers,
                             intermediate_size=args.hidden * 3, head_dim=args.hidden // 4)
        path = ensure_tiny_model(spec, Path(tmp) / "models")
        tokenizer = load_tokenizer(str(path))
        model = AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32).eval()
        prompts = sorted({r["prompt"] for r in generate_rows(args.prompts, 1, ["topic"], seed=0)})
        layers = layer_indices(args.layers, [25, 50, 75])
        rule = PositionRule("last_k", k=10)

        def full_forward():
            texts = [target_text(tokenizer, p) for p in prompts]
            for i in range(0, len(texts), args.batch_size):
                enc = tokenizer(texts[i : i + args.batch_size], return_tensors="pt", padding=True,
                                padding_side="right", add_special_tokens=False)
                model(**enc, output_hidden_states=True)

        def extract():
            extract_activations(model, tokenizer, prompts, layers, rule, batch_size=args.batch_size)

        full_s = timed(full_forward, args.repeats)
        extract_s = timed(extract, args.repeats)
        cache_dir = Path(tmp) / "acts"
        first, again = ExtractionStats(), ExtractionStats()
        start = time.perf_counter()
        extract_activations(model, tokenizer, prompts, layers, rule, batch_size=args.batch_size,
                            cache=ActivationCache(cache_dir, "bench"), stats=first)
        first_s = time.perf_counter() - start
        start = time.perf_counter()
        extract_activations(model, tokenizer, prompts, layers, rule, batch_size=args.batch_size,
                            cache=ActivationCache(cache_dir, "bench"), stats=again)
        cached_s = time.perf_counter() - start
    assert again.forward_passes == 0
    print(f"{len(prompts)} prompts, layers {layers} of {args.layers}: full forward {full_s:.3f}s, "
          f"extraction {extract_s:.3f}s (ratio {extract_s / full_s:.3f}); first extraction with cache writes "
          f"{first_s:.3f}s, cached rerun {cached_s:.3f}s (speed-up {first_s / cached_s:.1f}x, 0 forward passes)")
    if args.write:
        update_benchmarks(args.write, "activations", [
            "| benchmark | setting | ao_calib | baseline | ratio | device |",
            "|---|---|---|---|---|---|",
            f"| extraction vs full forward | {len(prompts)} prompts, random Qwen3 {args.layers} layers x "
            f"{args.hidden}, layers {layers}, batch {args.batch_size} | {extract_s:.3f} s | {full_s:.3f} s "
            f"| {extract_s / full_s:.3f} | {device_name()} |",
            f"| cached rerun vs first extraction | same, safetensors cache | {cached_s:.3f} s | {first_s:.3f} s "
            f"| {cached_s / first_s:.3f} ({first_s / cached_s:.1f}x faster, 0 forward passes) | {device_name()} |",
        ], command="python -m bench.activations --write BENCHMARKS.md")


if __name__ == "__main__":
    main()
