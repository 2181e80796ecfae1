"""Bootstrap mode frequency: the share of the most frequent of k sampled answers, and its exact expectation."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from ao_calib.calibration.confidence_methods import (OTHER, answer_outcome, answer_share, expected_mode_share,
                                                     mode_frequency, modal_probability, outcome_probabilities,
                                                     outcome_token_ids)


def test_answers_are_compared_as_the_task_checks_a_yes_no_answer():
    assert answer_outcome("[epistemic status: 80] Yes, it is.") == "yes"
    assert answer_outcome("[Epistemic Status:7]   no.") == "no"
    assert answer_outcome("YES!") == "yes"  # untagged: the whole text is the answer
    assert answer_outcome("[epistemic status: 90] Maybe") == OTHER
    assert answer_outcome("[epistemic status: 90]") == OTHER
    assert answer_outcome("[epistemic status: 90] Yesterday") == OTHER


def test_mode_frequency_by_hand():
    samples = ["[epistemic status: 80] Yes", "[epistemic status: 60] No", "yes.", "[epistemic status: 80] yes",
               "I cannot tell", "Perhaps", "No"]
    assert mode_frequency(samples) == ("yes", 3 / 7)
    # the two non-yes/no answers are one outcome: they are scored wrong alike
    assert mode_frequency(["Perhaps", "unsure", "Yes"]) == (OTHER, 2 / 3)
    assert answer_share(samples, "[epistemic status: 99] No.") == 2 / 7


def test_a_tie_goes_to_the_answer_sampled_first():
    assert mode_frequency(["No", "Yes", "yes", "no"]) == ("no", 0.5)
    assert mode_frequency(["Yes", "No", "yes", "no"]) == ("yes", 0.5)


def test_mode_frequency_needs_samples():
    with pytest.raises(ValueError, match="at least one"):
        mode_frequency([])


def _binary_by_hand(p: float, k: int) -> float:
    """E[max(N, k − N)] / k for N ~ Binomial(k, p), summed term by term."""
    return sum(math.comb(k, n) * p ** n * (1 - p) ** (k - n) * max(n, k - n) for n in range(k + 1)) / k


@pytest.mark.parametrize("p,k", [(0.5, 20), (0.7, 20), (0.9, 5), (0.5, 1)])
def test_expected_mode_share_of_two_outcomes_by_hand(p, k):
    assert expected_mode_share([p, 1 - p], k) == pytest.approx(_binary_by_hand(p, k), abs=1e-12)


def test_expected_mode_share_small_cases_by_hand():
    # k = 2 fair coin: both the same (share 1) with probability 1/2, else 1/2 each way
    assert expected_mode_share([0.5, 0.5], 2) == pytest.approx(0.75)
    # three outcomes, k = 2: the same twice with probability Σp², else a 1-1 split
    p = [0.5, 0.3, 0.2]
    same = sum(x * x for x in p)
    assert expected_mode_share(p, 2) == pytest.approx(same + 0.5 * (1 - same))
    # k = 3, three outcomes: all three differ (share 1/3) with probability 3!·Πp, all the same with Σp³
    all_same, all_differ = sum(x ** 3 for x in p), 6 * 0.5 * 0.3 * 0.2
    assert expected_mode_share(p, 3) == pytest.approx(all_same + all_differ / 3 + (1 - all_same - all_differ) * 2 / 3)
    # an outcome of probability 0 changes nothing
    assert expected_mode_share([0.7, 0.3, 0.0], 20) == pytest.approx(expected_mode_share([0.7, 0.3], 20))
    assert expected_mode_share([1.0, 0.0, 0.0], 20) == pytest.approx(1.0)


def test_the_expected_mode_share_is_not_the_modal_probability_but_tends_to_it():
    p = [0.5, 0.3, 0.2]
    assert modal_probability(p) == 0.5
    assert expected_mode_share(p, 20) > 0.5 + 0.01  # the mode of 20 samples is whichever outcome led in them
    assert expected_mode_share(p, 400) == pytest.approx(0.5, abs=5e-3)
    assert expected_mode_share([0.5, 0.5], 20) == pytest.approx(0.588, abs=1e-3)


def test_expected_mode_share_matches_sampled_mode_frequency():
    p = [0.45, 0.35, 0.2]
    rng = np.random.default_rng(0)
    words = np.array(["Yes", "No", "Maybe"])
    draws = [mode_frequency(list(words[rng.choice(3, size=20, p=p)]))[1] for _ in range(4000)]
    assert np.mean(draws) == pytest.approx(expected_mode_share(p, 20), abs=0.01)


@pytest.mark.parametrize("bad", [[0.5, 0.4], [1.2, -0.2], [], [float("nan"), 1.0]])
def test_expected_mode_share_refuses_what_is_not_a_distribution(bad):
    with pytest.raises(ValueError, match="probabilities"):
        expected_mode_share(bad, 20)


def test_first_token_outcome_probabilities_on_a_real_tokenizer(tiny_tokenizer):
    """Outcome probabilities read off a next-token distribution over a real vocabulary agree with sampling that
    distribution, decoding each token after the tag and comparing the answers as the task does."""
    ids = outcome_token_ids(tiny_tokenizer)
    for outcome, token_ids in ids.items():
        assert token_ids and all(answer_outcome(tiny_tokenizer.decode([i])) == outcome for i in token_ids)
    one_token_yes = tiny_tokenizer(" Yes", add_special_tokens=False)["input_ids"]
    if len(one_token_yes) == 1:
        assert one_token_yes[0] in ids["yes"]
    # a next-token distribution: 0.5 on yes tokens, 0.3 on no tokens, 0.2 spread over the rest
    probs = torch.full((len(tiny_tokenizer),), 0.2 / (len(tiny_tokenizer) - len(ids["yes"]) - len(ids["no"])),
                       dtype=torch.float64)
    probs[ids["yes"]] = 0.5 / len(ids["yes"])
    probs[ids["no"]] = 0.3 / len(ids["no"])
    logits = probs.log() + 3.0  # a softmax is blind to a shift
    assert outcome_probabilities(logits, ids) == pytest.approx([0.5, 0.3, 0.2], abs=1e-9)
    generator = torch.Generator().manual_seed(0)
    tokens = torch.multinomial(probs, 20 * 1500, replacement=True, generator=generator).view(1500, 20)
    texts = tiny_tokenizer.batch_decode(tokens.reshape(-1, 1))
    shares = [mode_frequency(["[epistemic status: 80]" + t for t in texts[i * 20:(i + 1) * 20]])[1]
              for i in range(1500)]
    assert np.mean(shares) == pytest.approx(expected_mode_share(outcome_probabilities(logits, ids), 20), abs=0.015)
