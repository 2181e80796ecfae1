"""Bounded inputs: prompts longer than ``trainer.max_prompt_length`` tokens (with the chat template) are dropped or
cut by ``trainer.prompt_length_policy``, counted and logged, before any of them reaches generation."""

from __future__ import annotations

import logging
from dataclasses import replace

from ao_calib.core.errors import AOCalibError
from ao_calib.runtime import distributed

log = logging.getLogger(__name__)


def prompt_length(tokenizer, prompt, chat_template_kwargs: dict) -> int:
    if isinstance(prompt, str):
        return len(tokenizer(prompt, add_special_tokens=False)["input_ids"])
    ids = tokenizer.apply_chat_template(prompt, tokenize=True, add_generation_prompt=True, **chat_template_kwargs)
    return len(ids["input_ids"] if isinstance(ids, dict) or hasattr(ids, "keys") else ids)


def _cut(tokenizer, text: str, drop_tokens: int) -> str:
    ids = tokenizer(text, add_special_tokens=False)["input_ids"]
    return tokenizer.decode(ids[: max(0, len(ids) - drop_tokens)])


def _truncated(tokenizer, prompt, limit: int, length: int, chat_template_kwargs: dict):
    """``prompt`` with its longest message (or the string itself) shortened until the whole fits, or None."""
    for _ in range(3):  # re-tokenising a cut text can merge tokens differently: a few rounds settle it
        over = length - limit
        if over <= 0:
            return prompt
        if isinstance(prompt, str):
            prompt = _cut(tokenizer, prompt, over)
        else:
            longest = max(range(len(prompt)), key=lambda i: len(str(prompt[i].get("content", ""))))
            prompt = [dict(m) for m in prompt]
            prompt[longest]["content"] = _cut(tokenizer, str(prompt[longest]["content"]), over)
        length = prompt_length(tokenizer, prompt, chat_template_kwargs)
    return prompt if length <= limit else None


def guard_prompts(data, tokenizer, limit: int | None, policy: str | None, chat_template_kwargs: dict):
    """``(data, counts)``: the task's splits (``ao_calib.task_api.TaskData``) with every prompt within ``limit``
    tokens, and how many rows of each split were dropped or truncated."""
    if limit is None:
        return data, {}
    policy = str(getattr(policy, "value", policy))
    if policy == "truncate" and data.steering is not None:
        raise AOCalibError("trainer.prompt_length_policy=truncate: this task's prompts carry activation "
                           "placeholders that a cut would break; use prompt_length_policy=drop")
    counts: dict[str, int] = {}
    splits = {}
    for name in ("train", "test"):
        split = getattr(data, name)
        prompts = split["prompt"]
        lengths = [prompt_length(tokenizer, p, chat_template_kwargs) for p in prompts]
        over = [i for i, n in enumerate(lengths) if n > limit]
        if not over:
            splits[name] = split
            continue
        drop = set(over)
        if policy == "truncate":
            fixed = {i: _truncated(tokenizer, prompts[i], limit, lengths[i], chat_template_kwargs) for i in over}
            drop = {i for i, p in fixed.items() if p is None}
            split = split.map(lambda row, i: {"prompt": fixed[i]} if i in fixed and fixed[i] is not None else {},
                              with_indices=True)
        if drop:
            split = split.select([i for i in range(len(split)) if i not in drop])
        truncated = len(over) - len(drop) if policy == "truncate" else 0
        counts.update({k: v for k, v in ((f"{name}_truncated", truncated), (f"{name}_dropped", len(drop))) if v})
        longest = max(lengths)
        log.warning("%s split: %d of %d prompts exceed trainer.max_prompt_length=%d tokens (longest %d): %s",
                    name, len(over), len(lengths), limit, longest,
                    "truncated" if policy == "truncate" else "dropped")
        if distributed.is_main():
            print(f"[prompts] {name}: {len(over)} of {len(lengths)} prompts over trainer.max_prompt_length={limit} "
                  f"tokens (longest {longest}) {'truncated' if policy == 'truncate' else 'dropped'}", flush=True)
        splits[name] = split
    if counts and len(splits["train"]) == 0:
        raise AOCalibError(f"every training prompt exceeds trainer.max_prompt_length={limit} tokens: raise it")
    return replace(data, **splits), counts
