"""Calibration metrics over confidences in [0, 1] and 0/1 correctness.

Bins are equal-width over [0, 1]: bin i holds confidences in [i/n, (i+1)/n), and the top bin is closed, so a
confidence of exactly 1.0 falls in the last bin.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class ReliabilityBin:
    lower: float
    upper: float
    count: int
    mean_confidence: float | None
    accuracy: float | None


def _arrays(confidences: Sequence[float], correct: Sequence[float]) -> tuple[np.ndarray, np.ndarray]:
    conf = np.asarray(confidences, dtype=float)
    corr = np.asarray(correct, dtype=float)
    if conf.shape != corr.shape or conf.ndim != 1:
        raise ValueError(f"confidences {conf.shape} and correct {corr.shape} must be equal-length 1-D sequences")
    if conf.size and (conf.min() < 0 or conf.max() > 1):
        raise ValueError("confidences must lie in [0, 1]")
    return conf, corr


def reliability_bins(confidences: Sequence[float], correct: Sequence[float], n_bins: int = 10
                     ) -> list[ReliabilityBin]:
    conf, corr = _arrays(confidences, correct)
    index = np.minimum((conf * n_bins).astype(int), n_bins - 1)
    bins = []
    for i in range(n_bins):
        mask = index == i
        n = int(mask.sum())
        bins.append(ReliabilityBin(i / n_bins, (i + 1) / n_bins, n,
                                   float(conf[mask].mean()) if n else None, float(corr[mask].mean()) if n else None))
    return bins


def expected_calibration_error(confidences: Sequence[float], correct: Sequence[float], n_bins: int = 10) -> float:
    """Σ_bins (n_bin / N)·|accuracy_bin − mean confidence_bin|."""
    bins = reliability_bins(confidences, correct, n_bins)
    total = sum(b.count for b in bins)
    if total == 0:
        return float("nan")
    return sum(b.count / total * abs(b.accuracy - b.mean_confidence) for b in bins if b.count)


def max_calibration_error(confidences: Sequence[float], correct: Sequence[float], n_bins: int = 10) -> float:
    """The largest |accuracy − mean confidence| over non-empty bins."""
    gaps = [abs(b.accuracy - b.mean_confidence) for b in reliability_bins(confidences, correct, n_bins) if b.count]
    return max(gaps) if gaps else float("nan")


def brier_score(confidences: Sequence[float], correct: Sequence[float]) -> float:
    conf, corr = _arrays(confidences, correct)
    return float(np.mean((conf - corr) ** 2)) if conf.size else float("nan")


def calibration_summary(confidences: Sequence[float], correct: Sequence[float], n_bins: int = 10) -> dict:
    return {
        "accuracy": float(np.mean(correct)) if len(correct) else float("nan"),
        "mean_confidence": float(np.mean(confidences)) if len(confidences) else float("nan"),
        "ece": expected_calibration_error(confidences, correct, n_bins),
        "mce": max_calibration_error(confidences, correct, n_bins),
        "brier": brier_score(confidences, correct),
    }


def plot_reliability_diagram(confidences: Sequence[float], correct: Sequence[float], out_path, title: str = "",
                             n_bins: int = 10):
    """Accuracy against confidence per bin, with each bin's count written on its bar."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    bins = reliability_bins(confidences, correct, n_bins)
    fig = Figure(figsize=(5, 5))
    FigureCanvasAgg(fig)
    ax = fig.add_subplot()
    width = 1.0 / n_bins
    for b in bins:
        if b.count:
            ax.bar(b.lower, b.accuracy, width=width, align="edge", edgecolor="black", color="tab:blue", alpha=0.7)
            ax.text(b.lower + width / 2, min(b.accuracy + 0.02, 0.95), str(b.count), ha="center", fontsize=8)
    ax.plot([0, 1], [0, 1], linestyle="--", color="gray", label="perfect calibration")
    summary = calibration_summary(confidences, correct, n_bins)
    ax.set(xlim=(0, 1), ylim=(0, 1), xlabel="confidence", ylabel="accuracy",
           title=title or f"ECE {summary['ece']:.3f}  Brier {summary['brier']:.3f}  (n={len(confidences)})")
    ax.legend(loc="upper left")
    fig.savefig(out_path, dpi=100, bbox_inches="tight")
    return out_path
