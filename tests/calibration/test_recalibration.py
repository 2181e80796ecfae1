"""Platt and temperature scaling against scikit-learn's logistic regression and a brute-force grid."""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.linear_model import LogisticRegression

from ao_calib.calibration.recalibration import PlattScaling, TemperatureScaling, logit


def overconfident_case(seed: int, n: int = 400):
    rng = np.random.default_rng(seed)
    truth = rng.uniform(0.5, 0.95, n)  # the real chance of being right
    correct = (rng.random(n) < truth).astype(float)
    stated = 1 / (1 + np.exp(-3 * logit(truth)))  # a model three times too sure of itself
    return stated, correct


def test_platt_matches_scikit_learn():
    stated, correct = overconfident_case(0)
    platt = PlattScaling.fit(stated, correct)
    reference = LogisticRegression(C=1e12, tol=1e-12, max_iter=10_000).fit(logit(stated)[:, None], correct)
    assert platt.a == pytest.approx(reference.coef_[0, 0], rel=1e-4)
    assert platt.b == pytest.approx(reference.intercept_[0], abs=1e-4)
    assert platt(stated) == pytest.approx(reference.predict_proba(logit(stated)[:, None])[:, 1], abs=1e-5)


def test_temperature_undoes_overconfidence_and_matches_a_grid():
    stated, correct = overconfident_case(1, 2000)
    fitted = TemperatureScaling.fit(stated, correct)
    x = logit(stated)

    def nll(t):
        p = np.clip(1 / (1 + np.exp(-x / t)), 1e-12, 1 - 1e-12)
        return -np.mean(correct * np.log(p) + (1 - correct) * np.log(1 - p))

    grid = np.exp(np.linspace(np.log(0.1), np.log(10), 4001))
    assert fitted.temperature == pytest.approx(grid[np.argmin([nll(t) for t in grid])], rel=2e-3)
    assert 2.0 < fitted.temperature < 4.5  # the data were made three times too sure
    assert np.mean(fitted(stated)) < np.mean(stated)


def test_platt_refuses_a_split_without_both_outcomes():
    with pytest.raises(ValueError, match="both right and wrong"):
        PlattScaling.fit([0.6, 0.7], [1, 1])
