"""The cost of one warm-up example of `experiment=oracle_smollm2_classification` on a CPU: the preset's SFT step
(activations injected) with every user token read (``task.activations.positions=full``, the preset's), against
cheaper rows, on the same model, statements, batch and seed, in alternating rounds in one process
(``bench.report.alternating_medians``). Each side's rows are built by the task itself (its extraction, centring
and prompts), so a side differs only in the overrides it names; its tokens per example are counted off its own
batches. Reported per example (a step's time over its batch size) and as a ratio to the preset's.

    python -m bench.oracle_example_cost [--rounds 3] [--steps 4] [--write BENCHMARKS.md]
"""

from __future__ import annotations

import statistics

from ao_calib.runs.run_dir import WARMUP
from ao_calib.trainers import build_trainer
from bench.grpo_setup import GRPOBench
from bench.report import alternating_medians, arguments, publish

BATCH = 16  # the preset's warmup.batch_size
# the preset on a few statements, its warm-up (SFT, activations injected) the stage timed
COMMON = ["experiment=oracle_smollm2_classification", "model.source=gguf", "logger=none", "eval.enabled=false",
          "warmup.save_steps=100000", "warmup.logging_steps=1", "task.data.classification.n_train=96",
          "task.data.classification.n_validation=4", "task.data.classification.n_test=4",
          "task.data.classification.ood=false"]
# side -> its overrides beside COMMON: the preset's positions, then fewer injected vectors
SIDES = {
    "full (preset)": [],
    "last 16": ["task.activations.positions=last_k", "task.activations.k=16"],
    "last 8": ["task.activations.positions=last_k", "task.activations.k=8"],
}


def tokens_per_example(bench: GRPOBench) -> float:
    """Mean tokens of a training row as the trainer sees it: the templated prompt and its completion."""
    rows = bench.data.train.select(range(min(64, len(bench.data.train))))
    texts = [bench.tokenizer.apply_chat_template(r["prompt"] + [{"role": "assistant", "content": r["completion"]}],
                                                 tokenize=False) for r in rows]
    counts = [len(bench.tokenizer(text, add_special_tokens=False)["input_ids"]) for text in texts]
    return statistics.mean(counts)


def warmup_trainer(bench: GRPOBench):
    """A builder of the preset's warm-up trainer over the bench's rows, from fresh weights."""
    return lambda out: build_trainer(bench.setup(out), bench.cfg.warmup, WARMUP)


def main() -> None:
    args = arguments(__doc__, 3, steps=(4, "optimiser steps per round")).parse_args()
    benches = {name: GRPOBench.compose([*COMMON, f"warmup.max_steps={args.steps}", *extra])
               for name, extra in SIDES.items()}
    medians = alternating_medians({name: warmup_trainer(b) for name, b in benches.items()}, args.rounds, args.steps)
    base = medians["full (preset)"]
    table = ["| rows | tokens per example | ms per example | ratio to the preset's |", "|---|---|---|---|"]
    for name, seconds in medians.items():
        table.append(f"| {name} | {tokens_per_example(benches[name]):.1f} | {1000 * seconds / BATCH:.0f} | "
                     f"{seconds / base:.3f} |")
    publish(table, "oracle example cost",
            f"python -m bench.oracle_example_cost --rounds {args.rounds} --steps {args.steps}", args.write)


if __name__ == "__main__":
    main()
