"""The epistemic-status contract, the calibration reward, and calibration metrics against hand computation."""

from __future__ import annotations

import math

import pytest

from ao_calib.calibration import calibration_reward, parse_epistemic_status
from ao_calib.calibration.metrics import (brier_score, expected_calibration_error, max_calibration_error,
                                          plot_reliability_diagram, reliability_bins)


@pytest.mark.parametrize("text,expected", [
    ("[epistemic status: 85] The text is about cooking.", (85, "The text is about cooking.", True)),
    ("  [Epistemic Status:7]Yes", (7, "Yes", True)),
    ("[EPISTEMIC STATUS :  100 ] No", (100, "No", True)),
    ("\n[epistemic status: 0] No idea", (0, "No idea", True)),
    ("[epistemic status: 101] Yes", (50, "[epistemic status: 101] Yes", False)),
    ("[epistemic status: -5] Yes", (50, "[epistemic status: -5] Yes", False)),
    ("[epistemic status: high] Yes", (50, "[epistemic status: high] Yes", False)),
    ("Yes [epistemic status: 90]", (50, "Yes [epistemic status: 90]", False)),
    ("", (50, "", False)),
    ("[epistemic status: 9.5] Yes", (50, "[epistemic status: 9.5] Yes", False)),
])
def test_parse_epistemic_status(text, expected):
    assert tuple(parse_epistemic_status(text)) == expected


@pytest.mark.parametrize("info,conf,reward", [(0.9, 90, 0.90), (0.2, 90, -0.045), (0.2, 100, -0.12)])
def test_calibration_reward_matches_the_seed_table(info, conf, reward):
    assert calibration_reward(info, conf, lam=0.5) == pytest.approx(reward)


def test_calibration_reward_prefers_honest_confidence():
    # Right answer: more confidence is better; wrong answer: less confidence is better.
    assert calibration_reward(1.0, 90, 0.5) > calibration_reward(1.0, 50, 0.5)
    assert calibration_reward(0.0, 10, 0.5) > calibration_reward(0.0, 90, 0.5)


def test_ece_mce_brier_hand_computed():
    conf = [0.05, 0.15, 0.15, 0.85, 0.95, 1.0]
    correct = [0, 0, 1, 1, 1, 1]
    # bins: [0,.1): {0.05:0} gap .05; [.1,.2): {.15:0,.15:1} acc .5 conf .15 gap .35;
    # [.8,.9): {.85:1} gap .15; [.9,1.0]: {.95:1, 1.0:1} acc 1 conf .975 gap .025 (1.0 lands in the top bin)
    ece = (1 * 0.05 + 2 * 0.35 + 1 * 0.15 + 2 * 0.025) / 6
    assert expected_calibration_error(conf, correct) == pytest.approx(ece)
    assert max_calibration_error(conf, correct) == pytest.approx(0.35)
    brier = (0.05**2 + 0.15**2 + 0.85**2 + 0.15**2 + 0.05**2 + 0.0) / 6
    assert brier_score(conf, correct) == pytest.approx(brier)
    bins = reliability_bins(conf, correct)
    assert [b.count for b in bins] == [1, 2, 0, 0, 0, 0, 0, 0, 1, 2]


def test_perfectly_calibrated_and_empty_inputs():
    assert expected_calibration_error([0.25] * 4, [1, 0, 0, 0]) == pytest.approx(0.0)
    assert math.isnan(expected_calibration_error([], []))
    with pytest.raises(ValueError):
        brier_score([1.5], [1])


def test_reliability_diagram_png(tmp_path):
    out = plot_reliability_diagram([0.1, 0.5, 0.9, 0.9], [0, 1, 1, 0], tmp_path / "rel.png")
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
