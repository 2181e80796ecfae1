"""Where the oracle writes its number, does it know whether the prompt holds the fact? A diagnostic for GRPO's
levels (issue "Confidence that reads the activations"): GRPO can only learn a number that follows readability if
the oracle's residual stream already tells a stated fact from an unstated one at the position where the number is
written. This script reads that stream and fits a linear probe for it.

For each row of the oracle task's own data (its generator, splits, extraction, centring and steering, as a run
builds them), the oracle's prompt is followed by the tag's opening ``[epistemic status: `` (the next token is the
number's first digit); the hidden states at that last position, at each of ``--layers``, under ``own`` (the prompt's
activations) and ``none`` (random vectors of the same norms), are the features. A logistic regression per layer,
fitted on ``--train-rows`` training rows to tell readable rows (the prompt states the fact) from unreadable ones,
is scored on the held-out rows by AUROC (validation split unless ``task.data.eval_split=test`` is passed). Beside
it, the number the oracle states on average there (its first digit's distribution, on the warm-up's scale of tens)
on readable and unreadable rows, and that number's AUROC for readability: a greedy number hides a shift of its
distribution until the shift crosses the mode.

    python -m experiments.oracle_confidence_probe --seed 42 [--adapter RUN/warmup/checkpoints/checkpoint-200]
        [--layers 10 20 30] [--train-rows 800] [override ...]   # e.g. task.warmup_rows.open_unstated=true

Without ``--adapter`` it probes the base model with the activations injected (what a fresh LoRA starts from). The
same ``trainer.seed`` and task overrides as the run that trained the adapter give the same rows. One torch thread
unless OMP_NUM_THREADS says otherwise.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import time

import numpy as np
import torch

from ao_calib.calibration.metrics import auroc
from ao_calib.core.settings import plain
from experiments.oracle_reading_loop import oracle_and_data, steered_pass

TAG_OPENING = "[epistemic status: "


def main() -> None:
    from sklearn.linear_model import LogisticRegression
    from sklearn.preprocessing import StandardScaler

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--experiment", default="oracle_smollm2")
    parser.add_argument("--seed", type=int, default=42, help="trainer.seed: data and splits")
    parser.add_argument("--adapter", default=None, help="a LoRA adapter folder (a checkpoint of the run)")
    parser.add_argument("--layers", type=int, nargs="+", default=[10, 20, 30],
                        help="hidden-state indices (0: embeddings, N: the last decoder layer's output)")
    parser.add_argument("--train-rows", type=int, default=800)
    parser.add_argument("--out", default=None, help="write the result as one JSON line here too")
    parser.add_argument("overrides", nargs="*")
    args = parser.parse_args()
    if "OMP_NUM_THREADS" not in os.environ:
        torch.set_num_threads(1)
    torch.manual_seed(args.seed)

    overrides = [f"experiment={args.experiment}", f"trainer.seed={args.seed}", *args.overrides]
    if not any(o.startswith("task.data.eval_split=") for o in overrides):
        overrides.append("task.data.eval_split=validation")
    start = time.time()
    cfg, tokenizer, model, _, data = oracle_and_data(overrides)
    chat_kwargs = plain(cfg.model.chat_template_kwargs)
    if args.adapter:
        from peft import PeftModel

        model = PeftModel.from_pretrained(model, args.adapter)
    model.eval()
    steering = data.steering
    train_rows = random.Random(args.seed).sample(data.train.to_list(), min(args.train_rows, len(data.train)))
    held_out = data.test.to_list()

    digits = [tokenizer.convert_tokens_to_ids(str(d)) for d in range(10)]
    # the number a first digit starts, on the warm-up's scale of tens: "1" starts 100 (10-40 are never taught)
    digit_value = torch.tensor([100.0 if d == 1 else 10.0 * d for d in range(10)])

    @torch.no_grad()
    def features(rows: list[dict], condition: str) -> tuple[dict[int, np.ndarray], list[float]]:
        """The last position's hidden state at each of ``--layers``, and the number the oracle states on average
        there (its first digit's distribution), per row."""
        out: dict[int, list[np.ndarray]] = {layer: [] for layer in args.layers}
        numbers: list[float] = []
        for i in range(0, len(rows), 32):
            chunk = rows[i:i + 32]
            output = steered_pass(model, tokenizer, steering, chat_kwargs, chunk, condition, suffix=TAG_OPENING,
                                  output_hidden_states=True)
            numbers += (torch.softmax(output.logits[:, -1, digits].float(), -1) @ digit_value).tolist()
            for layer in args.layers:
                out[layer].append(output.hidden_states[layer][:, -1].float().numpy())
        return {layer: np.concatenate(parts) for layer, parts in out.items()}, numbers

    result: dict = {"adapter": args.adapter, "seed": args.seed, "overrides": args.overrides,
                    "train_rows": len(train_rows), "held_out_rows": len(held_out),
                    "held_out_unreadable": sum(not r["readable"] for r in held_out)}
    y_train = np.array([bool(r["readable"]) for r in train_rows], dtype=float)
    y_held = [float(bool(r["readable"])) for r in held_out]
    kinds = sorted({r["kind"] for r in held_out})
    for condition in ("own", "none"):
        x_train, _ = features(train_rows, condition)
        x_held, numbers = features(held_out, condition)
        # the number the oracle would state on average (its first digit's distribution), not its greedy one
        result[f"{condition}_expected_number"] = {
            "readable": round(float(np.mean([n for n, y in zip(numbers, y_held) if y])), 1),
            "unreadable": round(float(np.mean([n for n, y in zip(numbers, y_held) if not y])), 1),
            "auroc": round(auroc([n / 100 for n in numbers], y_held), 3)}
        for layer in args.layers:
            scaler = StandardScaler().fit(x_train[layer])
            probe = LogisticRegression(C=0.1, max_iter=2000).fit(scaler.transform(x_train[layer]), y_train)
            p = probe.predict_proba(scaler.transform(x_held[layer]))[:, 1]
            entry = {"auroc": round(auroc(list(p), y_held), 3)}
            for kind in kinds:
                idx = [j for j, r in enumerate(held_out) if r["kind"] == kind]
                if len({y_held[j] for j in idx}) == 2:
                    entry[kind] = round(auroc([p[j] for j in idx], [y_held[j] for j in idx]), 3)
            result[f"{condition}_layer{layer}"] = entry
    result["seconds"] = round(time.time() - start)
    print(json.dumps(result), flush=True)
    if args.out:
        with open(args.out, "a") as f:
            f.write(json.dumps(result) + "\n")


if __name__ == "__main__":
    main()
