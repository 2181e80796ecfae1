"""Classical post-hoc recalibration of a model's own probability, the baseline a stated confidence must beat:
Platt scaling (a logistic fit on the logit) and temperature scaling (the logit divided by one fitted number),
each fitted on a calibration split by maximum likelihood and then applied to held-out rows."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

_EPS = 1e-6  # probabilities are clipped this far from 0 and 1 before taking logits


def logit(p: Sequence[float]) -> np.ndarray:
    p = np.clip(np.asarray(p, dtype=float), _EPS, 1 - _EPS)
    return np.log(p / (1 - p))


def _sigmoid(z: np.ndarray) -> np.ndarray:
    return 1.0 / (1.0 + np.exp(-z))


@dataclass(frozen=True)
class PlattScaling:
    """p' = σ(a·logit(p) + b)."""

    a: float
    b: float

    @classmethod
    def fit(cls, probabilities: Sequence[float], correct: Sequence[float], steps: int = 100) -> "PlattScaling":
        """Maximum-likelihood (a, b) by Newton's method; a tiny ridge keeps it finite on separable data."""
        x, y = logit(probabilities), np.asarray(correct, dtype=float)
        if x.size == 0 or y.min() == y.max():
            raise ValueError("Platt scaling needs a calibration split with both right and wrong answers")
        design = np.stack([x, np.ones_like(x)], axis=1)
        w = np.zeros(2)
        for _ in range(steps):
            p = _sigmoid(design @ w)
            grad = design.T @ (p - y) + 1e-6 * w
            hess = design.T @ (design * (p * (1 - p))[:, None]) + 1e-6 * np.eye(2)
            step = np.linalg.solve(hess, grad)
            w -= step
            if np.abs(step).max() < 1e-10:
                break
        return cls(float(w[0]), float(w[1]))

    def __call__(self, probabilities: Sequence[float]) -> np.ndarray:
        return _sigmoid(self.a * logit(probabilities) + self.b)


@dataclass(frozen=True)
class TemperatureScaling:
    """p' = σ(logit(p) / T)."""

    temperature: float

    @classmethod
    def fit(cls, probabilities: Sequence[float], correct: Sequence[float]) -> "TemperatureScaling":
        """The T in [0.01, 100] of least negative log-likelihood (golden-section search on log T; the likelihood is
        unimodal in 1/T)."""
        x, y = logit(probabilities), np.asarray(correct, dtype=float)
        if x.size == 0:
            raise ValueError("temperature scaling needs a non-empty calibration split")

        def nll(log_t: float) -> float:
            p = np.clip(_sigmoid(x / np.exp(log_t)), _EPS, 1 - _EPS)
            return float(-np.mean(y * np.log(p) + (1 - y) * np.log(1 - p)))

        lo, hi = np.log(0.01), np.log(100.0)
        ratio = (np.sqrt(5) - 1) / 2
        for _ in range(100):
            c, d = hi - ratio * (hi - lo), lo + ratio * (hi - lo)
            if nll(c) < nll(d):
                hi = d
            else:
                lo = c
        return cls(float(np.exp((lo + hi) / 2)))

    def __call__(self, probabilities: Sequence[float]) -> np.ndarray:
        return _sigmoid(logit(probabilities) / self.temperature)
