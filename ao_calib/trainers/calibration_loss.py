"""``warmup.confidence_loss=calibration``: an SFT stage learns the stated number from the model's own chance of
being right, in the same forward pass as the cross-entropy.

The calibration reward charges a stated confidence ``conf`` with ``λ·(conf − informativeness)²``. Its expectation
over the model's own distribution of the number's first token d (a digit where the tokenizer splits numbers into
digits, as SmolLM2's does; " 50" whole where it writes numbers as one token; each stands for one number, v(d)),
with the informativeness replaced by ``c``, the model's probability of the row's target answer (teacher-forced, no
gradient), is

    L = Σ_d p(d) · (v(d)/100 − c)²,

whose minimum over p puts all mass on the number nearest E[c | input]: a number that says how often the oracle is
right on rows like this one, learned from every warm-up row at once instead of from sampled numbers in GRPO. A
token that begins none of the numbers costs the penalty's maximum, 1. On a row whose label is a coin flip the
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

That penalty is linear in p, so it is least with all the mass on one number, and at any such number its gradient
is zero, even where c says the row needs another: a model whose number settles on the rows' mean c before it tells
the rows apart keeps that number (the tiny random-weight Qwen3 does: BENCHMARKS.md). ``form="two_hot"``
(``warmup.calibration_loss_form``) trains the number instead by cross-entropy, over the whole vocabulary, against
the two numbers that bracket 100·c, shared so that their mean is 100·c (``two_hot_targets``): its gradient p − target
does not vanish away from the target, and over rows alike its least value is the distribution whose mean number is
their mean c.

Only the number is trained by this term (c carries no gradient); the answer keeps its cross-entropy, unless a row
marks its answer out of the loss (``answer_in_loss: false``, e.g. a coin-flip label), where c still counts.
"""

from __future__ import annotations

import torch

COLUMNS = ("confidence_index", "answer_start", "answer_end")  # token indices in input_ids; -1: none
# per row, the token of each answer its label was drawn from uniformly (warmup.calibration_expected_over_draw); -1 pads
CHOICES = "answer_choice_ids"


def penalty_table(values: dict[int, int], c: torch.Tensor, width: int) -> torch.Tensor:
    """``[rows, width]``: the penalty (v(t)/100 − c)² of each number's first token t on each row, 1 for a token
    that begins none of the target numbers."""
    table = torch.ones(c.numel(), width, dtype=c.dtype, device=c.device)
    for token, number in values.items():
        table[:, token] = (number / 100 - c) ** 2
    return table


def expected_penalty(number_logits: torch.Tensor, values: dict[int, int], c: torch.Tensor) -> torch.Tensor:
    """Per row, Σ_t p(t)·penalty(t, c) with p the softmax over the first tokens' logits ``[rows, tokens]``."""
    return (number_logits.float().softmax(-1) * penalty_table(values, c.float(), number_logits.shape[-1])).sum(-1)


def two_hot_targets(values: dict[int, int], c: torch.Tensor, width: int) -> torch.Tensor:
    """``[rows, width]``: per row, the target distribution over the numbers' first tokens whose mean is 100·c: its
    mass on the two numbers that bracket 100·c, shared so that their mean is 100·c ("two-hot", as distributional
    value heads encode a scalar); all of it on the end number when 100·c lies beyond the scale."""
    ordered = sorted(values.items(), key=lambda item: item[1])
    tokens = torch.tensor([token for token, _ in ordered], device=c.device)
    numbers = torch.tensor([number for _, number in ordered], dtype=torch.float32, device=c.device)
    table = torch.zeros(c.numel(), width, dtype=torch.float32, device=c.device)
    if len(ordered) == 1:  # one number: it takes all the mass
        table[:, tokens[0]] = 1.0
        return table
    target = (100 * c.float()).clamp(numbers[0], numbers[-1])
    upper = torch.searchsorted(numbers, target).clamp(1, len(ordered) - 1)
    lower = upper - 1
    share = ((numbers[upper] - target) / (numbers[upper] - numbers[lower])).clamp(0, 1)  # the lower number's
    rows = torch.arange(c.numel(), device=c.device)
    table[rows, tokens[lower]] = share
    table[rows, tokens[upper]] += 1 - share
    return table


def expected_number(number_logits: torch.Tensor, values: dict[int, int]) -> torch.Tensor:
    """Per row, the number the first token's distribution states on average (tokens that begin none count 0)."""
    weights = torch.zeros(number_logits.shape[-1], dtype=torch.float32, device=number_logits.device)
    for token, number in values.items():
        weights[token] = number / 100
    return number_logits.float().softmax(-1) @ weights


def calibration_term(states: torch.Tensor, lm_head: torch.nn.Module, input_ids: torch.Tensor, indices: dict,
                     number_ids: list[int], values: dict[int, int], form: str = "expected_penalty",
                     greedy: bool = False) -> tuple[torch.Tensor, dict[str, float]] | None:
    """The term's mean over the rows that have a number and an answer within their ids, and what to log; None when
    the micro-batch has no such row. ``form``: ``expected_penalty`` (the reward's penalty in expectation over the
    number) or ``two_hot`` (cross-entropy against ``two_hot_targets``). A row that names the answers its label was
    drawn from uniformly (``CHOICES`` in ``indices``) takes as c the mean of their probabilities where its answer
    starts. ``greedy``: c is whether greedy decoding gets the answer right (every answer token the most likely one;
    on a drawn label, the share of the answers it was drawn from that is the most likely), not its probability."""
    number_at, start, end = (indices[k] for k in COLUMNS)
    choices = indices.get(CHOICES)
    rows = ((number_at > 0) & (start > 0) & (end > start)).nonzero().flatten().tolist()
    if not rows:
        return None
    firsts = torch.tensor(number_ids, device=states.device)
    logits = lm_head(states[rows, number_at[rows] - 1])  # the state before the number
    number_logits = logits[:, firsts]
    with torch.no_grad():
        c = []
        for row in rows:
            a, b = int(start[row]), int(end[row])
            logps = lm_head(states[row, a - 1:b - 1]).float().log_softmax(-1)
            drawn_from = choices[row][choices[row] >= 0] if choices is not None else None
            if greedy:  # each token the most likely one: 1 or 0, what greedy decoding would get right
                logps = torch.where(logps == logps.max(-1, keepdim=True).values, 0.0, -torch.inf)
            if drawn_from is not None and drawn_from.numel():
                # the label is a uniform draw from these answers: its probability's expectation over the draw
                c.append(logps[0, drawn_from].exp().mean())
            else:
                c.append(logps.gather(-1, input_ids[row, a:b, None]).sum().exp())
        c = torch.stack(c)
    penalty = expected_penalty(number_logits, values, c)
    if form == "two_hot":
        # over the whole vocabulary: a token that begins no number is a wrong one here, not one left alone
        targets = two_hot_targets(values, c, number_logits.shape[-1])
        value = -(targets * logits.float().log_softmax(-1)[:, firsts]).sum(-1).mean()
    else:
        value = penalty.mean()
    with torch.no_grad():
        stated = expected_number(number_logits, values)
    return value, {"calibration/penalty": penalty.mean().item(), "calibration/answer_probability": c.mean().item(),
                   "calibration/stated_number": stated.mean().item()}
