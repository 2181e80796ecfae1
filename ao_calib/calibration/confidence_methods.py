"""Confidence methods that read a yes/no answerer from outside its stated number: agreement among sampled answers.

Bootstrap mode frequency: sample ``k`` answers at temperature 1; the confidence is the share of the most frequent
one (``mode_frequency``). Answers are compared the way a yes/no reference is checked: the text after the
``[epistemic status: NN]`` tag, read by its first word as yes or no (``ao_calib.judges.label.yes_no``); every other
answer (another word, no answer) is one outcome, ``OTHER``, since each of them is scored wrong alike.

Where the answer's outcome is decided by its first token after the tag, the sampling need not be done: with the
next-token distribution over that token read into outcome probabilities ``p`` (``outcome_probabilities``), the
counts of ``k`` samples are Multinomial(k, p), and ``expected_mode_share`` is the exact expectation of the mode
frequency over them. It is not ``max(p)``: a fair coin's mode share over 20 draws is 0.588 on average, not 0.5
(each draw's mode is the side that came up more often). ``modal_probability`` (``max(p)``) is the k → ∞ limit of
the mode frequency, the one to name when a method says "the probability of the modal answer".
"""

from __future__ import annotations

import itertools
import math
from collections import Counter
from collections.abc import Callable, Sequence

import numpy as np

from ao_calib.calibration.contract import parse_epistemic_status
from ao_calib.judges.label import yes_no

OTHER = "other"  # every answer that opens with neither yes nor no
OUTCOMES = ("yes", "no", OTHER)  # the order of ``outcome_probabilities``
DEFAULT_SAMPLES = 20
_MAX_COMPOSITIONS = 2_000_000  # count vectors ``expected_mode_share`` may sum over


def answer_outcome(completion: str) -> str:
    """"yes", "no" or ``OTHER``: a completion (tagged or not) by the first word of its answer after the tag."""
    return yes_no(parse_epistemic_status(completion).answer) or OTHER


def mode_frequency(answers: Sequence[str], normalise: Callable[[str], str] = answer_outcome) -> tuple[str, float]:
    """(the most frequent normalised answer, its share of ``answers``). A tie goes to the answer sampled first, so
    the result depends only on the samples, not on a hash order; the share is the same either way."""
    if not answers:
        raise ValueError("mode_frequency needs at least one sampled answer")
    counts = Counter(normalise(a) for a in answers)  # insertion-ordered: most_common keeps the first of a tie
    mode, count = counts.most_common(1)[0]
    return mode, count / len(answers)


def answer_share(answers: Sequence[str], answer: str, normalise: Callable[[str], str] = answer_outcome) -> float:
    """The share of the sampled ``answers`` that agree with ``answer`` (e.g. the greedy one a row is scored on),
    both normalised alike. Equal to the mode frequency where ``answer`` is the mode. Its exact expectation over k
    samples is that answer's outcome probability itself, whatever k (the own-answer probability, but over all
    outcomes rather than renormalised over yes and no)."""
    if not answers:
        raise ValueError("answer_share needs at least one sampled answer")
    target = normalise(answer)
    return sum(normalise(a) == target for a in answers) / len(answers)


def _checked_probabilities(probabilities: Sequence[float]) -> np.ndarray:
    p = np.asarray(probabilities, dtype=float)
    if p.ndim != 1 or not p.size:
        raise ValueError(f"probabilities must be a non-empty 1-D sequence, got shape {p.shape}")
    if np.isnan(p).any() or p.min() < 0 or abs(p.sum() - 1) > 1e-6:
        raise ValueError(f"probabilities must be non-negative and sum to 1, got {p.tolist()}")
    return p / p.sum()


def modal_probability(probabilities: Sequence[float]) -> float:
    """``max(p)``: the probability of the modal outcome, the limit of the mode frequency as k → ∞ (where one
    outcome is likeliest; with a tie at the top the limit is that shared probability too)."""
    return float(_checked_probabilities(probabilities).max())


def expected_mode_share(probabilities: Sequence[float], k: int = DEFAULT_SAMPLES) -> float:
    """E[max_i N_i] / k for counts N ~ Multinomial(k, p): the exact mean of the bootstrap mode frequency of ``k``
    samples from outcome probabilities ``p``, summed over every count vector (231 of them for 3 outcomes and
    k = 20). Outcomes of probability 0 never occur and are left out of the sum."""
    if k < 1:
        raise ValueError(f"k must be at least 1, got {k}")
    p = _checked_probabilities(probabilities)
    p = p[p > 0]
    m = p.size
    if math.comb(k + m - 1, m - 1) > _MAX_COMPOSITIONS:
        raise ValueError(f"expected_mode_share: {m} outcomes over k={k} samples is too many count vectors to sum")
    counts = np.array(list(_compositions(k, m)), dtype=int)  # (C, m), each row sums to k
    log_factorial = np.array([math.lgamma(n + 1) for n in range(k + 1)])
    log_pmf = log_factorial[k] - log_factorial[counts].sum(axis=1) + counts @ np.log(p)
    return float(np.sum(np.exp(log_pmf) * counts.max(axis=1)) / k)


def _compositions(k: int, m: int):
    """Every vector of ``m`` non-negative counts summing to ``k`` (stars and bars)."""
    for bars in itertools.combinations(range(k + m - 1), m - 1):
        edges = (-1, *bars, k + m - 1)
        yield [edges[i + 1] - edges[i] - 1 for i in range(m)]


# --------------------------------------------------------------------- the first answer token's distribution

def outcome_token_ids(tokenizer) -> dict[str, list[int]]:
    """The vocabulary's tokens that alone open a yes or a no answer (their decoded text read by ``yes_no``: " Yes",
    "yes", "No," ...), by outcome. Every other token counts as ``OTHER``: exact where an answer is decided by its
    first token (a whole "Yes" or "No" token, as on SmolLM2 and Qwen3), an undercount of yes/no where a token that
    only begins one ("Y") could be completed to it."""
    ids: dict[str, list[int]] = {"yes": [], "no": []}
    texts = tokenizer.batch_decode([[i] for i in range(len(tokenizer))])
    for token_id, text in enumerate(texts):
        outcome = yes_no(text)
        if outcome is not None:
            ids[outcome].append(token_id)
    if not ids["yes"] or not ids["no"]:
        raise ValueError("outcome_token_ids: this tokenizer has no single token for yes or for no")
    return ids


def outcome_probabilities(logits, token_ids: dict[str, list[int]]) -> np.ndarray:
    """[P(yes), P(no), P(other)] (the order of ``OUTCOMES``) of the next token at temperature 1, from the logits at
    the position after the tag and the ids ``outcome_token_ids`` gives. The logits are conditioned on the tag the
    answerer wrote; a sample that also draws the tag's number at temperature 1 answers from a mixture over tags."""
    import torch

    probs = torch.softmax(torch.as_tensor(logits).double().reshape(-1), dim=-1)
    p_yes, p_no = float(probs[token_ids["yes"]].sum()), float(probs[token_ids["no"]].sum())
    return np.array([p_yes, p_no, max(0.0, 1.0 - p_yes - p_no)])
