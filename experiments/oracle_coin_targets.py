"""What the warm-up's number term learns from on rows the oracle cannot read (issue "Confidence that reads the
activations"): on training rows about stated and unstated facts, the oracle's probability of each yes/no answer
after its tag, and of the row's label (c, the term's target), beside the number it states on average.

For each of ``--rows`` training rows of each kind (the oracle task's own rows, as a run builds them), the oracle's
prompt under ``own`` activations is followed by ``[epistemic status: 50]`` and the next token's probabilities of
" Yes" and " No" are read; and by the tag's text before its number for the number's first token (its expected
value, each first token read as the number of ``task.warmup_rows.confidences`` it begins, as the warm-up's term reads
it).
A label drawn by a coin makes c near 0 or 1 on a row the oracle answers firmly, though its mean is about 0.5:
``warmup.calibration_expected_over_draw`` takes the mean over the coin instead.

    python -m experiments.oracle_coin_targets --seed 1 --adapter RUN/warmup/checkpoints/checkpoint-340 [--rows 200]
        [--by-kind] [--experiment quickstart] [overrides ...]
"""

from __future__ import annotations

import argparse
import json
import os
import random

import numpy as np
import torch

from ao_calib.calibration.contract import number_tokens
from ao_calib.core.settings import plain
from ao_calib.trainers import calibration_loss
from experiments.oracle_reading_loop import oracle_and_data, steered_pass


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--experiment", default="oracle_smollm2")
    parser.add_argument("--seed", type=int, default=42, help="trainer.seed: data and splits")
    parser.add_argument("--adapter", default=None, help="a LoRA adapter folder (a checkpoint of the run)")
    parser.add_argument("--rows", type=int, default=200, help="training rows of each kind (stated, unstated)")
    parser.add_argument("--by-kind", action="store_true", help="each kind of question apart (mood, topic, city)")
    parser.add_argument("overrides", nargs="*")
    args = parser.parse_args()
    if "OMP_NUM_THREADS" not in os.environ:
        torch.set_num_threads(1)
    cfg, tokenizer, model, _, data = oracle_and_data([f"experiment={args.experiment}", f"trainer.seed={args.seed}",
                                                      *args.overrides])
    if args.adapter:
        from peft import PeftModel

        model = PeftModel.from_pretrained(model, args.adapter)
    model.eval()
    chat_kwargs = plain(cfg.model.chat_template_kwargs)
    rng = random.Random(args.seed)
    rows = data.train.to_list()
    groups = {"readable": [r for r in rows if r["readable"] is not False],
              "unstated": [r for r in rows if r["readable"] is False]}
    if args.by_kind:
        groups = {f"{name} {kind}": [r for r in group if r["kind"] == kind]
                  for name, group in groups.items() for kind in sorted({r["kind"] for r in rows})}
    yes, no = (tokenizer.encode(w, add_special_tokens=False)[0] for w in (" Yes", " No"))
    # each number's first token, the number it stands for, and the tag's text before it, as the warm-up reads them
    numbers_read = number_tokens(tokenizer, set(cfg.task.warmup_rows.confidences))
    result: dict = {"seed": args.seed, "adapter": args.adapter}
    with torch.no_grad():
        for name, group in groups.items():
            sample = rng.sample(group, min(args.rows, len(group)))
            if not sample:
                continue
            c, favoured, mass, numbers = [], [], [], []
            for i in range(0, len(sample), 25):
                chunk = sample[i:i + 25]
                first = steered_pass(model, tokenizer, data.steering, chat_kwargs, chunk, "own",
                                     suffix=numbers_read.prefix)
                numbers += (100 * calibration_loss.expected_number(first.logits[:, -1, numbers_read.ids],
                                                                   numbers_read.values)).tolist()
                after = steered_pass(model, tokenizer, data.steering, chat_kwargs, chunk, "own",
                                     suffix="[epistemic status: 50]").logits[:, -1].float().softmax(-1)
                for row, p in zip(chunk, after):
                    p_yes, p_no = float(p[yes]), float(p[no])
                    c.append(p_yes if row["answer"] == "Yes" else p_no)
                    favoured.append(max(p_yes, p_no) / max(p_yes + p_no, 1e-9))
                    mass.append(p_yes + p_no)
            result[name] = {"rows": len(sample), "c": round(float(np.mean(c)), 3),
                            "favoured_answer_probability": round(float(np.mean(favoured)), 3),
                            "favoured_over_0.8": round(float(np.mean([f > 0.8 for f in favoured])), 3),
                            "yes_plus_no": round(float(np.mean(mass)), 3),
                            "expected_number": round(float(np.mean(numbers)), 1)}
    print(json.dumps(result), flush=True)


if __name__ == "__main__":
    main()
