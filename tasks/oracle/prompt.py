"""The Activation Oracle's prompts: the oracle's own (one user turn naming the source layer, one placeholder per
injected vector, then the question; placeholders are located from the token ids and checked, never assumed),
and the judge's grading prompt."""

from __future__ import annotations

from collections.abc import Sequence

PLACEHOLDER = " ?"

# What a judge (judge=litellm or judge=local) is asked about each oracle answer; ``{prompt}`` is the text the
# activations came from. The judge sees the text, the oracle did not: that asymmetry is what makes the judge's
# informativeness a cheap ground truth.
JUDGE_PROMPT = (
    "You are grading an answer produced by a model that could not see the text below; it only saw internal "
    "activations computed from it.\n\n"
    "Text:\n<<<\n{prompt}\n>>>\n\n"
    "Question about the text: {question}\n"
    "Answer to grade: {answer}\n\n"
    "Score how informative and correct the answer is about the text, from 0 (wrong, empty or evasive) to 100 "
    "(correct and specific). A vague answer that is technically true scores low. Think briefly if needed, then "
    "end with a final line of the form 'SCORE: <0-100>'."
)


def oracle_user_text(source_layer: int, num_vectors: int, question: str) -> str:
    return f"Layer: {source_layer}\n" + PLACEHOLDER * num_vectors + " \n" + question


def oracle_messages(source_layer: int, num_vectors: int, question: str) -> list[dict]:
    return [{"role": "user", "content": oracle_user_text(source_layer, num_vectors, question)}]


def placeholder_token_id(tokenizer) -> int:
    ids = tokenizer.encode(PLACEHOLDER, add_special_tokens=False)
    if len(ids) != 1:
        raise ValueError(f"the placeholder {PLACEHOLDER!r} is {len(ids)} tokens in this tokenizer; it must be one")
    return ids[0]


def find_placeholder_positions(ids: Sequence[int], token_id: int, count: int) -> list[int]:
    """Positions of the first run of placeholder tokens. The run must hold exactly ``count`` consecutive tokens
    (a question may contain " ?" later; only the first run is the injection slot). Works on left-padded rows."""
    ids = list(ids)
    try:
        start = ids.index(token_id)
    except ValueError:
        raise ValueError(f"no placeholder token {token_id} in the prompt") from None
    end = start
    while end < len(ids) and ids[end] == token_id:
        end += 1
    if end - start != count:
        raise ValueError(f"expected {count} consecutive placeholder tokens, found a run of {end - start}")
    return list(range(start, end))


def encode_oracle_prompt(tokenizer, source_layer: int, num_vectors: int, question: str,
                         chat_template_kwargs: dict | None = None) -> tuple[list[int], list[int]]:
    """Token ids of the templated prompt (with the generation prompt) and its placeholder positions."""
    text = tokenizer.apply_chat_template(oracle_messages(source_layer, num_vectors, question), tokenize=False,
                                         add_generation_prompt=True, **(chat_template_kwargs or {}))
    ids = tokenizer.encode(text, add_special_tokens=False)
    return ids, find_placeholder_positions(ids, placeholder_token_id(tokenizer), num_vectors)
