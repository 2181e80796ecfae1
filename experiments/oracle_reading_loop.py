"""How fast does an oracle learn to read, and which question form does it learn first? A minimal training loop
on the oracle task's own data (``OracleTask.build_data``: the generator, splits, extraction, centring and the
activation store; the SFT warm-up's rows, ``Task.warmup_data``: readable-only and open questions as the preset sets
them) and its own steering (``data.steering``), with LoRA from ``model.lora``, trained on one answer token, with
none of the pipeline's cost (no tag, no generation): it separates reading from everything else the SFT warm-up
does.

Each step trains on ``--batch`` rows of the warm-up's rows, in a seeded shuffle; the rows that
``task.warmup_rows.open_fraction`` asks as open questions ("What is the user's mood?") are trained on the fact's first
token, the others on Yes/No. Every ``--every`` steps it scores ``--eval-rows`` validation rows, readable and
unreadable apart, under ``own`` (the prompt's activations) and ``none`` (the task's random vectors of the same
norms):

- yes/no: the sign of logit(Yes) - logit(No) against the label; beside it the probability of the answer given
  (softmax over Yes/No), its mean per kind and readability and its AUROC against being right: does the reader
  know when it has read?
- open: the fact whose first token has the highest logit among the kind's values (and "not stated" with
  ``task.warmup_rows.open_unstated``), against the row's fact (or "not stated" for an unstated one, with that option).

    python -m experiments.oracle_reading_loop --steps 200 --seed 1 --out curve.jsonl [--experiment oracle_smollm2]
        [--lr 3e-4] [override ...]        # e.g. task.warmup_rows.open_fraction=0 task.activations.k=28

``--seed`` is ``trainer.seed`` (data, splits and shuffles) and the training seed; ``task.data.eval_split`` is
validation. One line per evaluation is printed and written to ``--out``. One torch thread unless OMP_NUM_THREADS
says otherwise.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import time

import torch
from ao_calib_tasks.oracle.rows.generate import CITIES, MOODS, NOT_STATED, TOPICS

from ao_calib.calibration.metrics import auroc
from ao_calib.config.compose import compose_run_config
from ao_calib.core.settings import plain
from ao_calib.models import loading as models
from ao_calib.task_api import build_task

VALUES = {"mood": sorted(MOODS), "topic": sorted(TOPICS), "city": sorted(CITIES)}


def oracle_and_data(overrides: list[str]):
    """(cfg, tokenizer, base model, task, data) as a run builds them: the oracle task's rows, splits, activations
    (the base model's, before any adapter) and steering."""
    cfg = compose_run_config(overrides)
    source = models.model_source(cfg.model, cfg.paths.cache_dir)
    tokenizer = models.load_tokenizer(source, cfg.model)
    model = models.load_base_model(cfg.model, source)
    start = time.time()
    task = build_task(cfg)
    data = task.build_data(tokenizer, model)
    print(f"data and activations in {time.time() - start:.0f} s", flush=True)
    return cfg, tokenizer, model, task, data


def steered_pass(model, tokenizer, steering, chat_kwargs: dict, rows: list[dict], condition: str, suffix: str = "",
                 **forward_kwargs):
    """One forward pass over the oracle prompts of ``rows`` (chat template, then ``suffix``; left-padded so the last
    position is every row's last token) with ``condition``'s vectors injected as the SFT warm-up injects them."""
    texts = [tokenizer.apply_chat_template(r["prompt"], tokenize=False, add_generation_prompt=True, **chat_kwargs)
             + suffix for r in rows]
    enc = tokenizer(texts, return_tensors="pt", padding=True, padding_side="left", add_special_tokens=False)
    with steering.context(model, steering.batch_for(rows, enc["input_ids"], condition), "sft"):
        return model(**enc, **forward_kwargs)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--experiment", default="oracle_smollm2")
    parser.add_argument("--steps", type=int, default=200)
    parser.add_argument("--batch", type=int, default=16)
    parser.add_argument("--lr", type=float, default=3e-4)
    parser.add_argument("--every", type=int, default=20)
    parser.add_argument("--eval-rows", type=int, default=96)
    parser.add_argument("--seed", type=int, default=42, help="trainer.seed: data, splits, shuffles and training")
    parser.add_argument("--out", required=True)
    parser.add_argument("overrides", nargs="*")
    args = parser.parse_args()
    torch.manual_seed(args.seed)
    if "OMP_NUM_THREADS" not in os.environ:
        torch.set_num_threads(1)

    cfg, tokenizer, model, task, data = oracle_and_data([f"experiment={args.experiment}", f"trainer.seed={args.seed}",
                                                         "task.data.eval_split=validation", *args.overrides])
    chat_kwargs = plain(cfg.model.chat_template_kwargs)
    model = models.attach_lora(model, cfg.model)
    train = task.warmup_data(cfg.warmup, model, tokenizer, data, run_dir=None).train.to_list()
    steering = data.steering
    yes, no = (tokenizer.encode(w, add_special_tokens=False)[0] for w in ("Yes", "No"))
    # with task.warmup_rows.open_unstated an open question about an unstated fact is answered "not stated"
    values = {kind: names + ([NOT_STATED] if cfg.task.warmup_rows.open_unstated else [])
              for kind, names in VALUES.items()}
    first = {kind: [tokenizer.encode(v, add_special_tokens=False)[0] for v in names]
             for kind, names in values.items()}
    for kind, ids in first.items():
        assert len(set(ids)) == len(ids), f"{kind}: two values share a first token"

    def last_logits(rows: list[dict], condition: str) -> torch.Tensor:
        return steered_pass(model, tokenizer, steering, chat_kwargs, rows, condition).logits[:, -1]

    def target(row: dict) -> int:
        if row["answer"] in ("Yes", "No"):
            return yes if row["answer"] == "Yes" else no
        return first[row["kind"]][values[row["kind"]].index(row["answer"])]

    @torch.no_grad()
    def evaluate(rows: list[dict]) -> dict:
        model.eval()
        result = {}
        for form in ("yes_no", "open"):
            for condition in ("own", "none"):
                hits: dict[str, list[bool]] = {}
                sure: dict[str, list[float]] = {}  # yes/no: the probability of the answer given, P(Yes) vs P(No)
                scored: list[tuple[float, bool]] = []
                rng = random.Random(0)
                for i in range(0, len(rows), 32):
                    chunk = [task.asked_openly(r, rng, data) if form == "open" else r for r in rows[i:i + 32]]
                    logits = last_logits(chunk, condition)
                    for row, out in zip(chunk, logits):
                        group = row["kind"] + ("" if row["readable"] else "_unstated")
                        if form == "open":
                            right = values[row["kind"]][int(out[first[row["kind"]]].argmax())] == row["answer"]
                        else:
                            right = bool(out[yes] > out[no]) == (row["answer"] == "Yes")
                            p = float(torch.softmax(out[[yes, no]].float(), 0).max())
                            sure.setdefault(group, []).append(p)
                            scored.append((p, right))
                        hits.setdefault(group, []).append(right)
                result[f"{form}_{condition}"] = {k: round(sum(v) / len(v), 3) for k, v in sorted(hits.items())}
                if sure:
                    # does the reader know when it reads? its answer's probability, per kind and over all rows
                    result[f"{form}_{condition}_answer_probability"] = {
                        k: round(sum(v) / len(v), 3) for k, v in sorted(sure.items())}
                    result[f"{form}_{condition}_answer_probability_auroc"] = round(
                        auroc([p for p, _ in scored], [float(r) for _, r in scored]), 3)
        model.train()
        return result

    rng = random.Random(args.seed)
    held_out = rng.sample(data.test.to_list(), min(args.eval_rows, len(data.test)))
    optimizer = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=args.lr, weight_decay=0.0)
    queue: list[dict] = []
    start = time.time()
    with open(args.out, "w") as out:
        for step in range(1, args.steps + 1):
            if len(queue) < args.batch:
                queue += rng.sample(train, len(train))
            batch, queue = queue[:args.batch], queue[args.batch:]
            loss = torch.nn.functional.cross_entropy(last_logits(batch, "own"),
                                                     torch.tensor([target(r) for r in batch]))
            loss.backward()
            optimizer.step()
            optimizer.zero_grad()
            if step % args.every == 0 or step == args.steps:
                record = {"step": step, "examples": step * args.batch, "loss": round(loss.item(), 3),
                          "seconds": round(time.time() - start), **evaluate(held_out)}
                print(json.dumps(record), flush=True)
                out.write(json.dumps(record) + "\n")
                out.flush()


if __name__ == "__main__":
    main()
