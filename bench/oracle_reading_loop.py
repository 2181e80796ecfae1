"""How fast does an oracle learn to read, and which question form does it learn first? A minimal training loop
around the project's own parts (the generator, extraction, centring, norm-matched steering at layer 1, LoRA from
``model.lora``), on one answer token, with none of the pipeline's cost (no tag, no generation): it separates
reading from everything else the SFT warm-up does.

Each step trains on ``--batch`` rows of the train split's readable rows; a share ``--open`` of them is asked as an
open question whose answer is the fact ("What is the user's mood?" -> "positive", task.sft_open_fraction), the rest
as the generator's yes/no questions. Every ``--every`` steps it scores validation rows, readable and unreadable
apart, under ``own`` (the prompt's activations) and ``none`` (random vectors of the same norms):

- yes/no: the sign of logit(Yes) - logit(No) against the label;
- open: the fact whose first token has the highest logit among the kind's values, against the drawn fact.

    python -m bench.oracle_reading_loop --open 0.5 --steps 200 --out curve.jsonl [--experiment oracle_smollm2]
        [--k 16] [--lr 3e-4] [--seed 42] [override ...]

The data, position rule and centring come from the experiment (``task.*`` overrides apply); one line per
evaluation is printed and written to ``--out``. One torch thread unless OMP_NUM_THREADS says otherwise.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import random
import time

import torch

from ao_calib import models
from ao_calib.config import compose_run_config
from ao_calib.steering import steer
from ao_calib.steering.activations import PositionRule, extract_activations, layer_indices
from ao_calib_tasks.oracle.generate import MOODS, TOPICS, generate_splits, open_question
from ao_calib_tasks.oracle.prompt import oracle_user_text, placeholder_token_id

VALUES = {"mood": sorted(MOODS), "topic": sorted(TOPICS)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--experiment", default="oracle_smollm2")
    parser.add_argument("--open", type=float, default=0.0, help="share of training rows asked as open questions")
    parser.add_argument("--steps", type=int, default=200)
    parser.add_argument("--batch", type=int, default=16)
    parser.add_argument("--lr", type=float, default=3e-4)
    parser.add_argument("--every", type=int, default=20)
    parser.add_argument("--eval-rows", type=int, default=96)
    parser.add_argument("--seed", type=int, default=42, help="data and training seed")
    parser.add_argument("--out", required=True)
    parser.add_argument("overrides", nargs="*")
    args = parser.parse_args()
    torch.manual_seed(args.seed)
    if "OMP_NUM_THREADS" not in os.environ:
        torch.set_num_threads(1)

    cfg = compose_run_config([f"experiment={args.experiment}", *args.overrides])
    task, gen, acfg = cfg.task, cfg.task.data.generate, cfg.task.activations
    source = models.model_source(cfg.model, cfg.paths.cache_dir)
    tokenizer = models.load_tokenizer(source, cfg.model)
    model = models.load_base_model(cfg.model, source)
    layer = layer_indices(model.config.num_hidden_layers, task.layer_percents)[0]
    train, validation, _ = generate_splits(gen.n_train_prompts, gen.n_test_prompts, gen.questions_per_prompt,
                                           [k for k in gen.kinds if k in VALUES], args.seed,
                                           n_validation_prompts=gen.n_validation_prompts or 150,
                                           stated_fraction=gen.stated_fraction, phrasings=gen.phrasings)
    prompts = sorted({r["prompt"] for r in train + validation})
    rule = PositionRule(acfg.positions, k=acfg.k, window_min=acfg.window_min, window_max=acfg.window_max)
    start = time.time()
    extracted = extract_activations(model, tokenizer, prompts, [layer], rule, batch_size=16)
    vectors = {p: a[layer].float() for p, a in zip(prompts, extracted)}
    if acfg.center:  # the training prompts' mean, as task.activations.center takes it
        mean = torch.cat([vectors[p] for p in {r["prompt"] for r in train}]).mean(0)
        vectors = {p: v - mean for p, v in vectors.items()}
    print(f"activations of {len(prompts)} prompts in {time.time() - start:.0f} s", flush=True)

    model = models.attach_lora(model, cfg.model)
    placeholder = placeholder_token_id(tokenizer)
    yes, no = (tokenizer.encode(w, add_special_tokens=False)[0] for w in ("Yes", "No"))
    first = {kind: [tokenizer.encode(v, add_special_tokens=False)[0] for v in values]
             for kind, values in VALUES.items()}
    for kind, ids in first.items():
        assert len(set(ids)) == len(ids), f"{kind}: two values share a first token"

    def last_logits(rows: list[dict], condition: str) -> torch.Tensor:
        texts, injected = [], []
        for row in rows:
            own = vectors[row["prompt"]]
            if condition == "none":  # random vectors with the norms of the own ones, the same for a prompt
                seed = int(hashlib.sha1(row["prompt"].encode()).hexdigest()[:12], 16)
                noise = torch.randn(own.shape, generator=torch.Generator().manual_seed(seed))
                own = noise * own.norm(dim=-1, keepdim=True) / noise.norm(dim=-1, keepdim=True)
            messages = [{"role": "user", "content": oracle_user_text(layer, len(own), row["question"])}]
            texts.append(tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True))
            injected.append(own)
        enc = tokenizer(texts, return_tensors="pt", padding=True, padding_side="left", add_special_tokens=False)
        positions = [(ids == placeholder).nonzero().flatten().tolist() for ids in enc["input_ids"]]
        with steer(model, injected, positions, layer=task.injection_layer, coefficient=task.steering_coefficient,
                   check_token_id=placeholder):
            return model(**enc).logits[:, -1]

    def as_open(row: dict, rng: random.Random) -> dict:
        return {**row, "question": open_question(row["kind"], rng, gen.phrasings), "open": True}

    def target(row: dict) -> int:
        if row.get("open"):
            return first[row["kind"]][VALUES[row["kind"]].index(row["fact"])]
        return yes if row["answer"] == "Yes" else no

    @torch.no_grad()
    def evaluate(rows: list[dict]) -> dict:
        model.eval()
        result = {}
        for form in ("yes_no", "open"):
            for condition in ("own", "none"):
                hits: dict[str, list[bool]] = {}
                rng = random.Random(0)
                for i in range(0, len(rows), 32):
                    chunk = [as_open(r, rng) if form == "open" else r for r in rows[i:i + 32]]
                    logits = last_logits(chunk, condition)
                    for row, out in zip(chunk, logits):
                        if form == "open":
                            right = VALUES[row["kind"]][int(out[first[row["kind"]]].argmax())] == row["fact"]
                        else:
                            right = bool(out[yes] > out[no]) == (row["answer"] == "Yes")
                        hits.setdefault(row["kind"] + ("" if row["readable"] else "_unstated"), []).append(right)
                result[f"{form}_{condition}"] = {k: round(sum(v) / len(v), 3) for k, v in sorted(hits.items())}
        model.train()
        return result

    rng = random.Random(args.seed)
    readable = [r for r in train if r["readable"]]
    held_out = rng.sample(validation, min(args.eval_rows, len(validation)))
    optimizer = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=args.lr, weight_decay=0.0)
    queue: list[dict] = []
    start = time.time()
    with open(args.out, "w") as out:
        for step in range(1, args.steps + 1):
            if len(queue) < args.batch:
                queue += rng.sample(readable, len(readable))
            batch, queue = queue[:args.batch], queue[args.batch:]
            batch = [as_open(r, rng) if rng.random() < args.open else r for r in batch]
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
