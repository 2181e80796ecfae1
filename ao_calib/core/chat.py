"""A row's chat prompt as the model reads it before its answer: one rendering for generation, the SFT targets, the
episode loop and the baselines that score an answer's probability, so that none of them drifts from the others."""

from __future__ import annotations


def chat_prompt_text(tokenizer, messages: list[dict], chat_template_kwargs: dict) -> str:
    """``messages`` rendered by the tokenizer's chat template with the generation prompt (tokenised without special
    tokens added)."""
    return tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True, **chat_template_kwargs)
