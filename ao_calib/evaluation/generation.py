"""Batched generation for evaluation: left-padded chat prompts, greedy or seeded sampling, with a task's
activation steering in the prefill."""

from __future__ import annotations

import contextlib

import torch
from tqdm.auto import tqdm
from transformers import DynamicCache, LogitsProcessorList

from ao_calib.core.chat import chat_prompt_text
from ao_calib.evaluation.turn_cache import (
    TurnCache,
    batch_from_turn_cache,
    entries_after,
)
from ao_calib.models.fast_generation import (
    MIN_SHARED_PREFIX,
    cache_keyword,
    common_prefix,
    has_sliding_window,
    left_pad_after_prefix,
    prefill_prefix,
)
from ao_calib.runtime import distributed


@torch.no_grad()
def generate_completions(model, tokenizer, rows: list[dict], *, chat_template_kwargs: dict, max_new_tokens: int,
                         batch_size: int, steering=None, condition: str = "own", desc: str = "eval",
                         temperature: float | None = None, seed: int = 0, number_plan=None,
                         turn_cache: TurnCache | None = None) -> list[str]:
    """Completions for the rows' chat prompts, batched with left padding: greedy (``temperature`` None or 0), or
    sampled at ``temperature``
    from ``seed`` (the caller's random state is left as it was). With ``steering``, the activations of
    ``condition`` are injected during the prefill: the row's own (``own``), another prompt's (``other``) or random
    vectors of the same norms (``none``). ``number_plan`` (an ``ao_calib.calibration.decoding.ExpectedNumber``,
    greedy only): the tag's number is the mean of the model's distribution over its scale, not the most likely.
    ``turn_cache`` (an episode's turns, unsteered): each prompt reuses the keys and values of what it shares with a
    row's last turn, and what this turn reads and writes is kept for the next."""
    texts = [chat_prompt_text(tokenizer, r["prompt"], chat_template_kwargs) for r in rows]
    # Batches of similar lengths: a left-padded batch costs its longest prompt times its size, and held-out sets mix
    # prompts of 150 and 900 tokens (BFCL's docs). The completions are put back in the rows' order.
    lengths = [len(ids) for ids in tokenizer(texts, add_special_tokens=False)["input_ids"]]
    order = sorted(range(len(texts)), key=lengths.__getitem__)
    texts, rows = [texts[i] for i in order], [rows[i] for i in order]
    device = next(model.parameters()).device
    was_training, padding_side = model.training, tokenizer.padding_side
    model.eval()
    tokenizer.padding_side = "left"
    greedy = not temperature  # None or 0
    sampling = {"do_sample": False} if greedy else {"do_sample": True, "temperature": temperature, "top_p": 1.0,
                                                    "top_k": 0}
    completions: list[str] = []
    synced = distributed.is_distributed() and distributed.sharded()
    # a sliding-window cache drops the oldest keys, so a kept turn could not be reused: nothing kept for one
    reusing = turn_cache is not None and steering is None and not synced and not has_sliding_window(model.config)
    try:
        with torch.random.fork_rng(devices=[device] if device.type == "cuda" else []):
            torch.manual_seed(seed)
            for start in tqdm(range(0, len(texts), batch_size), desc=desc, leave=False,
                              disable=not distributed.is_main()):
                batch = tokenizer(texts[start : start + batch_size], return_tensors="pt", padding=True,
                                  add_special_tokens=False).to(device)
                if reusing:
                    batch = with_turn_cache(model, batch, tokenizer.pad_token_id, turn_cache)
                elif steering is None and not synced:  # steering places vectors by position in whole prompts
                    batch = prefilled_prefix(model, batch, tokenizer.pad_token_id)
                context = contextlib.nullcontext()
                if steering is not None:
                    injected = steering.batch_for(rows[start : start + batch_size], batch["input_ids"],
                                                  condition=condition)
                    context = steering.context(model, injected, "eval")
                if number_plan is not None:
                    sampling["logits_processor"] = LogitsProcessorList(
                        [number_plan.processor(batch["input_ids"].shape[1], batch["input_ids"].shape[0])])
                with context:
                    # synced_gpus: a sharded model's forward is a collective, so a rank whose rows all ended keeps
                    # stepping with the others until every rank is done (the callers give every rank as many rows)
                    out = model.generate(**batch, max_new_tokens=max_new_tokens, pad_token_id=tokenizer.pad_token_id,
                                         synced_gpus=synced, **sampling)
                completions += tokenizer.batch_decode(out[:, batch["input_ids"].shape[1]:], skip_special_tokens=True)
                if reusing and (keyword := cache_keyword(model)) in batch:
                    for entry in entries_after(batch[keyword], out, batch["attention_mask"]):
                        turn_cache.keep(entry)
    finally:
        tokenizer.padding_side = padding_side
        model.train(was_training)
    in_order = [""] * len(completions)
    for position, i in enumerate(order):
        in_order[i] = completions[position]
    return in_order


def prefilled_prefix(model, batch, pad_id: int) -> dict:
    """A left-padded batch whose prompts start alike (a long system turn, an episode's first turns) laid out as
    [shared tokens][padding][each row's rest], the shared tokens' KV cache computed once for every row: ``generate``
    then decodes what it decodes from the whole prompts. Other batches are returned as they are."""
    ids, mask = batch["input_ids"], batch["attention_mask"]
    rows = [row[keep.bool()].tolist() for row, keep in zip(ids, mask)]
    shared = common_prefix(rows) if len(rows) > 1 and not has_sliding_window(model.config) else 0
    if shared < MIN_SHARED_PREFIX:
        return batch
    cache, keyword = DynamicCache(config=model.config), cache_keyword(model)
    prefill_prefix(model, ids.new_tensor(rows[0][:shared])[None], len(rows), cache, keyword)
    ids, mask = left_pad_after_prefix(rows, shared, pad_id, ids.device)
    return {"input_ids": ids, "attention_mask": mask, keyword: cache}


def with_turn_cache(model, batch, pad_id: int, turn_cache: TurnCache) -> dict:
    """A batch of episode turns reusing what each row kept from its last turn (``turn_cache``); at an episode's
    first turn, the batch's common start prefilled once (``prefilled_prefix``). Either way with a cache of its
    own, which ``generate`` fills and the caller keeps."""
    ids, mask = batch["input_ids"], batch["attention_mask"]
    rows = [row[keep.bool()].tolist() for row, keep in zip(ids, mask)]
    found = [turn_cache.take(row) for row in rows]
    keyword = cache_keyword(model)
    if any(reused for _, reused in found):
        ids, mask, cache = batch_from_turn_cache(rows, found, model.config, pad_id, ids.device)
        return {"input_ids": ids, "attention_mask": mask, keyword: cache}
    batch = prefilled_prefix(model, batch, pad_id)
    return batch if keyword in batch else {**batch, keyword: DynamicCache(config=model.config)}
