"""``warmup.confidence_loss=calibration``: an SFT stage learns the stated number from the model's own chance of
being right, in the same forward pass as the cross-entropy.

The calibration reward charges a stated confidence ``conf`` with ``λ·(conf − informativeness)²``. Its expectation
over the model's own distribution of the number's first digit d (each digit stands for one number, its value v(d)),
with the informativeness replaced by ``c``, the model's probability of the row's target answer (teacher-forced,
no gradient), is

    L = Σ_d p(d) · (v(d)/100 − c)²,

whose minimum over p puts all mass on the number nearest E[c | input]: a number that says how often the oracle is
right on rows like this one, learned from every warm-up row at once instead of from sampled numbers in GRPO. A
digit that begins none of the numbers costs the penalty's maximum, 1. On a row whose label is a coin flip the
oracle cannot read (a fact the prompt does not state), c is its probability of whichever answer the coin chose,
0.5 in expectation whatever it believes, so the number is pushed towards 50 there and towards its hit rate on
the rows it reads. Row by row, though, c there is near 0 or 1 whenever the oracle answers firmly; with
``warmup.calibration_expected_over_draw`` a row that names the answers its label was drawn from takes the mean of
their probabilities instead, the same expectation without the coin's noise.

Alone, the term locks onto the first number it favours: its gradient for a digit is p(d) times that digit's
penalty against the mean, which vanishes once one digit holds all the mass, and early in a warm-up, before the
oracle reads, every row's c is alike (on SmolLM2 the number stayed at one value per seed, 50 or 70, while c rose
from 0.5 to 0.8: BENCHMARKS.md). So the stage keeps the drawn number (from the whole scale, independent of the
row) in the cross-entropy of every row: a prior that keeps every digit possible. Minimising both per input gives
p(d) = u(d) / (μ + w·E[penalty(d)]) for prior u and a normaliser μ, whose most likely digit, for a uniform u, is
the one nearest E[c | input]: what greedy decoding states.

Only the number is trained by this term (c carries no gradient); the answer keeps its cross-entropy, unless a row
marks its answer out of the loss (``answer_in_loss: false``, e.g. a coin-flip label), where c still counts.
"""

from __future__ import annotations

import torch

from ao_calib.errors import AOCalibError

COLUMNS = ("confidence_index", "answer_start", "answer_end")  # token indices in input_ids; -1: none
# per row, the token of each answer its label was drawn from uniformly (warmup.calibration_expected_over_draw); -1 pads
CHOICES = "answer_choice_ids"


def digit_token_ids(tokenizer) -> list[int]:
    """The ids of the single-token digits "0".."9"; refused, clearly, for a tokenizer that does not split numbers
    into digits (the first digit would then not be one token)."""
    ids = []
    for digit in "0123456789":
        encoded = tokenizer.encode(digit, add_special_tokens=False)
        if len(encoded) != 1:
            raise AOCalibError(f"warmup.confidence_loss=calibration needs each digit to be one token; this tokenizer "
                               f"writes {digit!r} as {len(encoded)} tokens: set warmup.confidence_loss=cross_entropy")
        ids.append(encoded[0])
    return ids


def penalty_table(values: dict[int, int], c: torch.Tensor) -> torch.Tensor:
    """``[rows, 10]``: the penalty (v(d)/100 − c)² of stating each first digit d on each row, 1 for a digit that
    begins none of the numbers."""
    table = torch.ones(c.numel(), 10, dtype=c.dtype, device=c.device)
    for digit, number in values.items():
        table[:, digit] = (number / 100 - c) ** 2
    return table


def expected_penalty(digit_logits: torch.Tensor, values: dict[int, int], c: torch.Tensor) -> torch.Tensor:
    """Per row, Σ_d p(d)·penalty(d, c) with p the softmax over the ten digits' logits ``[rows, 10]``."""
    return (digit_logits.float().softmax(-1) * penalty_table(values, c.float())).sum(-1)


def expected_number(digit_logits: torch.Tensor, values: dict[int, int]) -> torch.Tensor:
    """Per row, the number the first digit's distribution states on average (digits that begin none count 0)."""
    weights = torch.zeros(10, dtype=torch.float32, device=digit_logits.device)
    for digit, number in values.items():
        weights[digit] = number / 100
    return digit_logits.float().softmax(-1) @ weights


def calibration_term(states: torch.Tensor, lm_head: torch.nn.Module, input_ids: torch.Tensor, indices: dict,
                     digit_ids: list[int], values: dict[int, int]) -> tuple[torch.Tensor, dict[str, float]] | None:
    """The mean of ``expected_penalty`` over the rows that have a number and an answer within their ids, and what
    to log; None when the micro-batch has no such row. A row that names the answers its label was drawn from
    uniformly (``CHOICES`` in ``indices``) takes as c the mean of their probabilities where its answer starts."""
    number_at, start, end = (indices[k] for k in COLUMNS)
    choices = indices.get(CHOICES)
    rows = ((number_at > 0) & (start > 0) & (end > start)).nonzero().flatten().tolist()
    if not rows:
        return None
    digits = torch.tensor(digit_ids, device=states.device)
    digit_logits = lm_head(states[rows, number_at[rows] - 1])[:, digits]  # the state before the first digit
    with torch.no_grad():
        c = []
        for row in rows:
            a, b = int(start[row]), int(end[row])
            logps = lm_head(states[row, a - 1:b - 1]).float().log_softmax(-1)
            drawn_from = choices[row][choices[row] >= 0] if choices is not None else None
            if drawn_from is not None and drawn_from.numel():
                # the label is a uniform draw from these answers: its probability's expectation over the draw
                c.append(logps[0, drawn_from].exp().mean())
            else:
                c.append(logps.gather(-1, input_ids[row, a:b, None]).sum().exp())
        c = torch.stack(c)
    penalty = expected_penalty(digit_logits, values, c)
    with torch.no_grad():
        stated = expected_number(digit_logits, values)
    return penalty.mean(), {"calibration/penalty": penalty.mean().item(), "calibration/answer_probability":
                            c.mean().item(), "calibration/stated_number": stated.mean().item()}
