"""The model's own probability of answering with no call, and its best answer that is not empty.

An empty answer (nothing, or ``[]``) is BFCL's right answer to an irrelevance case and wrong on every other case.
A model trained on both answers ``[]`` where it cannot work out a call (BENCHMARKS.md, "The empty answers are what
the irrelevance cases teach"); ``task.min_no_call_probability`` lets evaluation answer with no call only where the
model's probability of the empty answer is at least that, and otherwise take its best answer that is not empty.
The probability is teacher-forced (the usual spellings of an empty answer, each ending the turn), not sampled; the
best answer is greedy, with every token refused that would leave the answer blank or ``[]``.
"""

from __future__ import annotations

import copy
import math
from dataclasses import dataclass

import torch
from transformers import LogitsProcessor, LogitsProcessorList

from ao_calib.core.chat import chat_prompt_text
from ao_calib.models.fast_generation import cache_keyword


def is_empty(answer: str) -> bool:
    """What BFCL's checker decodes to no call and ``empty_where_call_needed`` counts."""
    return answer.strip() in ("", "[]")


@dataclass(frozen=True)
class EmptyAnswerTokens:
    """A tokenizer's tokens for an empty answer (found once: each lookup decodes the whole vocabulary).

    ``continuations``: the usual token sequences of an empty answer, each ending the turn (the end of the turn
    alone, ``[]`` as the tokenizer splits it, every single token that reads ``[]``: SmolLM2's has `` []``); their
    probability is what :func:`no_call_probability` sums, whitespace around them not counted. ``blank``: the tokens
    refused while the answer so far is blank (special tokens, the end of the turn among them, whitespace, ``[]``,
    and ids past the tokenizer's vocabulary);
    ``closing``: those that read ``]``, refused while the answer so far reads ``[``."""

    continuations: list[list[int]]
    blank: list[int]
    closing: list[int]

    @classmethod
    def of(cls, tokenizer) -> EmptyAnswerTokens:
        texts = [tokenizer.decode([i]).strip() for i in range(len(tokenizer))]

        def reading(text: str) -> list[int]:
            return [i for i, t in enumerate(texts) if t == text]

        end = tokenizer.eos_token_id
        continuations = [[end], tokenizer("[]", add_special_tokens=False)["input_ids"] + [end]]
        continuations += [[i, end] for i in reading("[]")]
        blank = {end, *tokenizer.all_special_ids, *reading(""), *reading("[]")}
        return cls(continuations, sorted(i for i in blank if i < len(tokenizer)), reading("]"))


class RefuseEmptyAnswer(LogitsProcessor):
    """The model's best answer that is not empty, for a batch of one prompt (:class:`EmptyAnswerTokens`): what the
    answer so far reads decides which tokens are refused, so no spelling of an empty answer gets through."""

    def __init__(self, tokenizer, tokens: EmptyAnswerTokens, prompt_length: int):
        self.tokenizer, self.tokens, self.prompt_length = tokenizer, tokens, prompt_length

    def __call__(self, input_ids, scores):
        so_far = self.tokenizer.decode(input_ids[0, self.prompt_length:], skip_special_tokens=True).strip()
        if not so_far:
            scores[:, self.tokens.blank] = -float("inf")
            scores[:, len(self.tokenizer):] = -float("inf")  # the model's padding rows of its vocabulary decode to nothing
        elif so_far == "[":
            scores[:, self.tokens.closing] = -float("inf")
        return scores


@torch.no_grad()
def no_call_probability(model, prompt_ids: list[int], continuations: list[list[int]]) -> float:
    """The summed probability of the empty continuations after the prompt: one pass over the prompt, then each
    continuation's few tokens on a copy of its cache."""
    device = next(model.parameters()).device
    keyword = cache_keyword(model)
    prefill = model(input_ids=torch.tensor([prompt_ids], device=device), use_cache=True)
    first = torch.log_softmax(prefill.logits[0, -1].float(), dim=-1)
    total = 0.0
    for continuation in continuations:
        logp = float(first[continuation[0]])
        if len(continuation) > 1:
            out = model(input_ids=torch.tensor([continuation[:-1]], device=device), use_cache=True,
                        **{keyword: copy.deepcopy(prefill[keyword])})
            later = torch.log_softmax(out.logits[0].float(), dim=-1)
            logp += float(later[torch.arange(len(continuation) - 1), torch.tensor(continuation[1:])].sum())
        total += math.exp(logp)
    return total


@torch.no_grad()
def best_call(model, tokenizer, tokens: EmptyAnswerTokens, prompt_ids: list[int], max_new_tokens: int) -> str:
    """The greedy answer with the empty answer refused."""
    ids = torch.tensor([prompt_ids], device=next(model.parameters()).device)
    out = model.generate(input_ids=ids, attention_mask=torch.ones_like(ids), max_new_tokens=max_new_tokens,
                         do_sample=False, pad_token_id=tokenizer.pad_token_id,
                         logits_processor=LogitsProcessorList([RefuseEmptyAnswer(tokenizer, tokens, len(prompt_ids))]))
    return tokenizer.decode(out[0, len(prompt_ids):], skip_special_tokens=True)


def prompt_ids(tokenizer, row: dict, chat_template_kwargs: dict) -> list[int]:
    """The row's prompt tokens as evaluation's generation reads them."""
    text = chat_prompt_text(tokenizer, row["prompt"], chat_template_kwargs)
    return tokenizer(text, add_special_tokens=False)["input_ids"]


def answer_no_call_only_if_sure(model, tokenizer, rows: list[dict], answers: list[str], *, threshold: float,
                                chat_template_kwargs: dict, max_new_tokens: int) -> tuple[list[str], int, int]:
    """The answers with every empty one whose no-call probability is below ``threshold`` replaced by the model's
    best answer that is not empty; (answers, how many were replaced, how many were empty)."""
    empty = [i for i, answer in enumerate(answers) if is_empty(answer)]
    out, replaced = list(answers), 0
    if not empty:
        return out, replaced, 0
    tokens = EmptyAnswerTokens.of(tokenizer)
    was_training = model.training
    model.eval()
    try:
        for i in empty:
            row = rows[i]
            ids = prompt_ids(tokenizer, row, chat_template_kwargs)
            if no_call_probability(model, ids, tokens.continuations) < threshold:
                out[i], replaced = best_call(model, tokenizer, tokens, ids, max_new_tokens), replaced + 1
    finally:
        model.train(was_training)
    return out, replaced, len(empty)
