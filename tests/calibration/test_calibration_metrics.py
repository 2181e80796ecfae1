"""Per-example calibration metrics against hand-made cases with known answers and against independent
computations (scikit-learn's AUROC, brute-force tie-breaking, the Murphy identity)."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from scipy.stats import spearmanr
from sklearn.metrics import roc_auc_score

from ao_calib.calibration.metrics import (auroc, aurc, calibration_report, confidence_histogram, correlation,
                                          ece_floor, expected_calibration_error, murphy_decomposition,
                                          plot_reliability_diagram, plot_risk_coverage, risk_coverage,
                                          selective_accuracy)


def random_case(rng, n):
    conf = rng.integers(0, 11, n) / 10  # stated confidences come in steps, so ties are the rule
    correct = (rng.random(n) < conf * 0.8 + 0.1).astype(float)
    return conf, correct


def test_constant_confidence_has_no_resolution_and_ranks_at_chance():
    correct = [1, 1, 1, 0, 1, 1, 0, 1, 1, 1]
    report = calibration_report([0.7] * 10, correct)
    assert report["auroc"] == 0.5
    assert report["resolution"] == 0.0
    assert report["confidence_std"] == 0.0
    assert report["ece"] == pytest.approx(0.1) and report["ece_equal_mass"] == pytest.approx(0.1)
    # every coverage keeps rows at random: the error rate everywhere, and as the area
    assert report["aurc"] == pytest.approx(0.2)
    assert report["selective_accuracy@50"] == pytest.approx(0.8)


def test_ece_floor_is_the_ece_of_outcomes_drawn_from_the_confidences_themselves():
    """Against exact expectations: one bin of n rows stated at p has E|Binomial(n, p)/n - p| (the binomial's
    mean absolute deviation over n); rows stated at 0 or 1 add nothing; bins add up by their weights."""
    def exact(n, p):
        return sum(math.comb(n, k) * p ** k * (1 - p) ** (n - k) * abs(k / n - p) for k in range(n + 1))

    assert ece_floor([1.0] * 50 + [0.0] * 50) == 0.0
    assert exact(2, 0.5) == 0.25
    assert ece_floor([0.5, 0.5], draws=2000) == pytest.approx(0.25, abs=0.02)
    assert ece_floor([0.7] * 300, draws=2000) == pytest.approx(exact(300, 0.7), abs=0.002)
    # two bins (0.25 and 0.95), 100 rows each: half of each bin's expected deviation
    mixed = ece_floor([0.25] * 100 + [0.95] * 100, draws=2000)
    assert mixed == pytest.approx((exact(100, 0.25) + exact(100, 0.95)) / 2, abs=0.002)
    assert ece_floor([0.7] * 300) == ece_floor([0.7] * 300)  # seeded: a report is reproducible
    assert calibration_report([0.7] * 300, [1.0] * 210 + [0.0] * 90)["ece_floor"] == ece_floor([0.7] * 300)


def test_perfect_separation_and_hand_made_figures():
    conf = [0.9, 0.9, 0.8, 0.2, 0.1]
    correct = [1, 1, 1, 0, 0]
    report = calibration_report(conf, correct)
    assert report["auroc"] == 1.0
    assert report["aurc"] == pytest.approx(np.mean([0, 0, 0, 1 / 4, 2 / 5]))
    assert report["selective_accuracy@50"] == 1.0  # the top 3 rows
    assert report["selective_accuracy@80"] == pytest.approx(3 / 4)  # the top 4 rows
    # bins: .1 -> {0}, .2 -> {0}, .8 -> {1}, .9 -> {1, 1}; base rate 3/5
    assert report["uncertainty"] == pytest.approx(0.24)
    assert report["resolution"] == pytest.approx(2 / 5 * 0.36 + 3 / 5 * 0.16)
    assert report["reliability"] == pytest.approx((0.01 + 0.04 + 0.04 + 2 * 0.01) / 5)
    assert auroc([0.1, 0.9], [1, 0]) == 0.0
    assert math.isnan(auroc([0.3, 0.6], [1, 1]))  # one class only: undefined, not a number that looks fine


def test_auroc_matches_scikit_learn_with_ties():
    rng = np.random.default_rng(0)
    for _ in range(200):
        conf, correct = random_case(rng, int(rng.integers(2, 80)))
        if correct.min() == correct.max():
            continue
        assert auroc(conf, correct) == pytest.approx(roc_auc_score(correct, conf), abs=1e-12)


def test_continuous_outcomes_rank_by_correctness_and_correlate_with_the_score():
    rng = np.random.default_rng(1)
    info = rng.random(60)
    conf = np.clip(info + rng.normal(0, 0.2, 60), 0, 1)
    report = calibration_report(conf, info)
    assert report["auroc"] == pytest.approx(roc_auc_score(info >= 0.5, conf))
    assert report["brier"] == pytest.approx(np.mean((conf - info) ** 2))
    assert report["informativeness_pearson"] == pytest.approx(np.corrcoef(conf, info)[0, 1])
    assert report["informativeness_spearman"] == pytest.approx(spearmanr(conf, info).statistic)  # ties at 0 and 1
    assert "informativeness_pearson" not in calibration_report(conf, info >= 0.5)
    assert math.isnan(correlation([0.5] * 4, [0, 1, 0, 1]))


def test_murphy_terms_add_up_to_the_binned_brier():
    rng = np.random.default_rng(2)
    for _ in range(50):
        conf = rng.random(int(rng.integers(1, 100)))
        correct = (rng.random(conf.size) < conf).astype(float)
        m = murphy_decomposition(conf, correct)
        assert m.reliability - m.resolution + m.uncertainty == pytest.approx(m.binned_brier, abs=1e-12)
        assert m.resolution >= 0 and m.reliability >= 0
    # confidences already at one value per bin: the binned Brier is the Brier score
    conf = rng.integers(0, 10, 40) / 10
    correct = (rng.random(40) < conf).astype(float)
    report = calibration_report(conf, correct)
    assert report["brier_binned"] == pytest.approx(report["brier"])


def test_risk_coverage_is_the_expectation_over_tie_breaks():
    conf = np.array([0.9, 0.5, 0.5, 0.5, 0.2, 0.9])
    correct = np.array([1, 0, 1, 1, 0, 0])
    orders = [p for p in itertools.permutations(range(6)) if all(
        conf[p[i]] >= conf[p[i + 1]] for i in range(5))]  # every most-confident-first order
    brute = np.mean([np.cumsum(1 - correct[list(p)]) / np.arange(1, 7) for p in orders], axis=0)
    coverage, risk = risk_coverage(conf, correct)
    assert coverage.tolist() == pytest.approx([1 / 6, 2 / 6, 3 / 6, 4 / 6, 5 / 6, 1])
    assert risk == pytest.approx(brute)
    assert aurc(conf, correct) == pytest.approx(brute.mean())
    assert selective_accuracy(conf, correct, 0.5) == pytest.approx(1 - brute[2])


def test_equal_mass_bins_keep_ties_together_and_equal_width_on_spread_data():
    conf = [0.05, 0.15, 0.25, 0.35, 0.45, 0.55, 0.65, 0.75, 0.85, 0.95]
    correct = [0, 0, 1, 0, 1, 1, 0, 1, 1, 1]
    # one row per bin either way, so both are the mean |confidence - correct|
    expected = np.mean(np.abs(np.array(conf) - correct))
    assert expected_calibration_error(conf, correct, binning="width") == pytest.approx(expected)
    assert expected_calibration_error(conf, correct, binning="mass") == pytest.approx(expected)
    # ten equal confidences are one bin whatever the row order
    assert expected_calibration_error([0.6] * 10, [1] * 7 + [0] * 3, binning="mass") == pytest.approx(0.1)
    assert expected_calibration_error([0.6] * 10, [0] * 3 + [1] * 7, binning="mass") == pytest.approx(0.1)


def test_histogram_and_plots(tmp_path):
    assert confidence_histogram([0.0, 0.05, 0.5, 1.0, 1.0]) == [2, 0, 0, 0, 0, 1, 0, 0, 0, 2]
    rel = plot_reliability_diagram([0.1, 0.5, 0.9, 0.9], [0, 1, 1, 0], tmp_path / "rel.png")
    rc = plot_risk_coverage([0.1, 0.5, 0.9, 0.9], [0, 1, 1, 0], tmp_path / "rc.png")
    for out in (rel, rc):
        assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_bad_inputs_are_refused():
    with pytest.raises(ValueError, match="confidences"):
        calibration_report([1.2], [1])
    with pytest.raises(ValueError, match="outcomes"):
        calibration_report([0.5], [2])
    with pytest.raises(ValueError, match="equal-length"):
        calibration_report([0.5, 0.4], [1])
    with pytest.raises(ValueError, match="coverage"):
        selective_accuracy([0.5], [1], 0)
    assert math.isnan(calibration_report([], [])["auroc"])


def test_evaluation_figures_reach_the_wandb_summary(tmp_path, monkeypatch):
    wandb = pytest.importorskip("wandb")
    from ao_calib.monitoring.wandb import log_evaluation

    monkeypatch.setenv("WANDB_MODE", "offline")
    monkeypatch.setenv("WANDB_SILENT", "true")
    monkeypatch.setenv("WANDB_SERVICE", "")  # wandb writes its service here for child processes: gone after the test
    run = wandb.init(dir=str(tmp_path), project="ao_calib_test")
    try:
        log_evaluation("final", {"auroc": 0.5, "resolution": 0.0, "note": "not a number"})
        assert run.summary["eval_final/auroc"] == 0.5 and "eval_final/note" not in run.summary.keys()
    finally:
        run.finish()
        wandb.teardown()


def test_within_question_auroc_against_a_hand_computation():
    """Two questions: "a" ranks its rows perfectly (AUROC 1), "b" backwards (0), "c" is all right (left out).
    Weighted by rows: (1·3 + 0·2) / 5. A confidence that is constant inside each question scores 0.5, however
    well it separates the questions."""
    from ao_calib.calibration.metrics import within_group_auroc

    conf = [0.9, 0.2, 0.8, 0.3, 0.7, 0.5, 0.5]
    correct = [1, 0, 1, 1, 0, 1, 1]
    groups = ["a", "a", "a", "b", "b", "c", "c"]
    assert within_group_auroc(conf, correct, groups) == pytest.approx(3 / 5)
    by_question = {"a": 0.9, "b": 0.1, "c": 0.5}
    assert within_group_auroc([by_question[g] for g in groups], correct, groups) == 0.5
    assert auroc([by_question[g] for g in groups], correct) > 0.5  # the wording alone separates them overall
    assert math.isnan(within_group_auroc([0.5, 0.6], [1, 1], ["a", "b"]))
    rng = np.random.default_rng(3)
    conf, correct = random_case(rng, 60)
    groups = rng.integers(0, 4, 60).astype(str)
    expected = sum(roc_auc_score(correct[groups == g], conf[groups == g]) * (groups == g).sum()
                   for g in np.unique(groups)) / 60
    assert within_group_auroc(conf, correct, groups) == pytest.approx(expected)


def test_the_text_only_rule_is_each_questions_leave_one_out_hit_rate():
    from ao_calib.calibration.metrics import group_rate_rule

    correct = [1, 1, 0, 1, 0, 1]
    groups = ["a", "a", "a", "b", "b", "c"]
    # a: the other two of a; b: the other one of b; c (alone): the hit rate of the five other rows
    assert group_rate_rule(correct, groups).tolist() == pytest.approx([1 / 2, 1 / 2, 1, 0, 1, 3 / 5])
