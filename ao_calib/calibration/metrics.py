"""Per-example calibration metrics: does a stated confidence tell right answers from wrong ones?

Every figure takes confidences in [0, 1] and outcomes: 0/1 correctness, or a continuous score in [0, 1] (a judge's
informativeness), which counts as correct at ``CORRECT_AT`` or above. One call, ``calibration_report``, gives all
of them; training logs, evaluation, the report and wandb read the same names from it.

Conventions:
- Equal-width bins: bin i holds confidences in [i/n, (i+1)/n); the top bin is closed, so 1.0 falls in it.
- Equal-mass bins: edges at the confidence quantiles; equal confidences always share a bin.
- Ties in confidence are broken at random in the ranking figures (AUROC, risk–coverage), and each figure is the
  expectation over those tie-breaks, so a constant confidence gets AUROC 0.5 and a flat risk–coverage curve
  whatever the row order.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

CORRECT_AT = 0.5  # a continuous score at or above this counts as a correct answer
SELECTIVE_COVERAGES = (0.5, 0.8)


@dataclass(frozen=True)
class ReliabilityBin:
    lower: float
    upper: float
    count: int
    mean_confidence: float | None
    accuracy: float | None


def _arrays(confidences: Sequence[float], outcomes: Sequence[float]) -> tuple[np.ndarray, np.ndarray]:
    conf = np.asarray(confidences, dtype=float)
    out = np.asarray(outcomes, dtype=float)
    if conf.shape != out.shape or conf.ndim != 1:
        raise ValueError(f"confidences {conf.shape} and outcomes {out.shape} must be equal-length 1-D sequences")
    if conf.size and (np.isnan(conf).any() or conf.min() < 0 or conf.max() > 1):
        raise ValueError("confidences must lie in [0, 1]")
    if out.size and (np.isnan(out).any() or out.min() < 0 or out.max() > 1):
        raise ValueError("outcomes must lie in [0, 1]")
    return conf, out


def binarize(outcomes: Sequence[float]) -> np.ndarray:
    """0/1 correctness from outcomes in [0, 1] (a 0/1 outcome is unchanged)."""
    return (np.asarray(outcomes, dtype=float) >= CORRECT_AT).astype(float)


# ----------------------------------------------------------------------------------------------- binning

def equal_width_index(conf: np.ndarray, n_bins: int) -> np.ndarray:
    # the small nudge keeps a confidence on a bin edge (0.7 stated as 70/100) in the bin it opens
    return np.minimum(np.floor(conf * n_bins + 1e-9).astype(int), n_bins - 1)


def equal_mass_index(conf: np.ndarray, n_bins: int) -> np.ndarray:
    """Bins of about equal count, cut at confidence quantiles; a run of equal confidences is never split."""
    if not conf.size:
        return np.zeros(0, dtype=int)
    inner = np.unique(np.quantile(conf, np.linspace(0, 1, n_bins + 1)[1:-1], method="higher"))
    return np.searchsorted(inner, conf, side="right")


def reliability_bins(confidences: Sequence[float], correct: Sequence[float], n_bins: int = 10
                     ) -> list[ReliabilityBin]:
    """Equal-width bins with each bin's count, mean confidence and accuracy (None when empty)."""
    conf, corr = _arrays(confidences, correct)
    index = equal_width_index(conf, n_bins)
    bins = []
    for i in range(n_bins):
        mask = index == i
        n = int(mask.sum())
        bins.append(ReliabilityBin(i / n_bins, (i + 1) / n_bins, n,
                                   float(conf[mask].mean()) if n else None, float(corr[mask].mean()) if n else None))
    return bins


def _bin_stats(conf: np.ndarray, corr: np.ndarray, index: np.ndarray):
    """(weight n_k/N, mean confidence, accuracy) of each non-empty bin."""
    _, inverse, counts = np.unique(index, return_inverse=True, return_counts=True)
    weight = counts / conf.size
    mean_conf = np.bincount(inverse, weights=conf) / counts
    accuracy = np.bincount(inverse, weights=corr) / counts
    return weight, mean_conf, accuracy


# ------------------------------------------------------------------------------------------- the figures

def expected_calibration_error(confidences: Sequence[float], correct: Sequence[float], n_bins: int = 10,
                               binning: str = "width") -> float:
    """Σ_bins (n_k / N)·|accuracy_k − mean confidence_k|, over equal-width or equal-mass bins."""
    if binning not in ("width", "mass"):
        raise ValueError(f"binning must be 'width' or 'mass', got {binning!r}")
    conf, corr = _arrays(confidences, correct)
    if not conf.size:
        return float("nan")
    index = equal_width_index(conf, n_bins) if binning == "width" else equal_mass_index(conf, n_bins)
    weight, mean_conf, accuracy = _bin_stats(conf, corr, index)
    return float(np.sum(weight * np.abs(accuracy - mean_conf)))


def ece_floor(confidences: Sequence[float], n_bins: int = 10, draws: int = 200, seed: int = 0) -> float:
    """The ECE (equal-width bins) a perfectly calibrated model stating these same confidences would show on this
    many rows: the mean over ``draws`` sets of outcomes drawn from the confidences themselves (seeded, so a report
    is reproducible). ECE is biased upwards on few rows (on 300 rows stated at 0.5-1.0 this floor is about 0.03), so
    an ECE near its floor is as good as these rows can show."""
    conf, _ = _arrays(confidences, np.zeros(len(confidences)))
    if not conf.size:
        return float("nan")
    rng = np.random.default_rng(seed)
    return float(np.mean([expected_calibration_error(conf, (rng.random(conf.size) < conf).astype(float), n_bins)
                          for _ in range(draws)]))


def max_calibration_error(confidences: Sequence[float], correct: Sequence[float], n_bins: int = 10) -> float:
    """The largest |accuracy − mean confidence| over non-empty equal-width bins."""
    conf, corr = _arrays(confidences, correct)
    if not conf.size:
        return float("nan")
    _, mean_conf, accuracy = _bin_stats(conf, corr, equal_width_index(conf, n_bins))
    return float(np.max(np.abs(accuracy - mean_conf)))


def brier_score(confidences: Sequence[float], outcomes: Sequence[float]) -> float:
    conf, out = _arrays(confidences, outcomes)
    return float(np.mean((conf - out) ** 2)) if conf.size else float("nan")


@dataclass(frozen=True)
class MurphyDecomposition:
    """Brier of the binned forecast = reliability − resolution + uncertainty (exactly; Murphy 1973).

    The binned forecast replaces each confidence by its equal-width bin's mean confidence, so ``binned_brier``
    differs from the plain Brier score by the spread of confidences inside each bin."""

    reliability: float  # Σ (n_k/N)(mean confidence_k − accuracy_k)²: lower is better
    resolution: float  # Σ (n_k/N)(accuracy_k − accuracy)²: how far the bins' accuracies spread; higher is better
    uncertainty: float  # accuracy·(1 − accuracy): the Brier of always saying the base rate
    binned_brier: float


def murphy_decomposition(confidences: Sequence[float], correct: Sequence[float], n_bins: int = 10
                         ) -> MurphyDecomposition:
    conf, corr = _arrays(confidences, correct)
    if not conf.size:
        nan = float("nan")
        return MurphyDecomposition(nan, nan, nan, nan)
    index = equal_width_index(conf, n_bins)
    weight, mean_conf, accuracy = _bin_stats(conf, corr, index)
    base = corr.mean()
    forecast = mean_conf[np.unique(index, return_inverse=True)[1]]
    return MurphyDecomposition(reliability=float(np.sum(weight * (mean_conf - accuracy) ** 2)),
                               resolution=float(np.sum(weight * (accuracy - base) ** 2)),
                               uncertainty=float(base * (1 - base)),
                               binned_brier=float(np.mean((forecast - corr) ** 2)))


def _midranks(values: np.ndarray) -> np.ndarray:
    """1-based ranks, tied values sharing the mean of their ranks."""
    _, inverse, counts = np.unique(values, return_inverse=True, return_counts=True)
    ends = np.cumsum(counts)
    return ((ends - counts + 1 + ends) / 2.0)[inverse]


def auroc(confidences: Sequence[float], correct: Sequence[float]) -> float:
    """P(a correct row's confidence > a wrong row's), ties counting half (Mann–Whitney U / (n₁·n₀)).
    NaN when every row is right or every row is wrong."""
    conf, corr = _arrays(confidences, correct)
    positive = corr >= CORRECT_AT
    n_pos, n_neg = int(positive.sum()), int((~positive).sum())
    if not n_pos or not n_neg:
        return float("nan")
    ranks = _midranks(conf)
    return float((ranks[positive].sum() - n_pos * (n_pos + 1) / 2) / (n_pos * n_neg))


def within_group_auroc(confidences: Sequence[float], correct: Sequence[float], groups: Sequence[str]) -> float:
    """AUROC inside groups of rows (an exact question text), averaged with each group weighted by its row count.
    Only groups holding both a right and a wrong row count; NaN when none does. A confidence that only follows the
    question's wording (the same number for every row of a group) scores 0.5 here, whatever its overall AUROC."""
    conf, corr = _arrays(confidences, correct)
    keys = np.asarray(list(groups), dtype=object)
    if keys.shape != conf.shape:
        raise ValueError(f"groups ({keys.size}) and confidences ({conf.size}) must have the same length")
    total, weight = 0.0, 0
    for key in dict.fromkeys(keys.tolist()):
        mask = keys == key
        value = auroc(conf[mask], corr[mask])
        if not np.isnan(value):
            total += value * int(mask.sum())
            weight += int(mask.sum())
    return total / weight if weight else float("nan")


def group_rate_rule(correct: Sequence[float], groups: Sequence[str]) -> np.ndarray:
    """The confidence of a rule that reads only each row's group (its question text): the hit rate of the other
    rows of the same group (leave-one-out), or of all other rows when the group has no other row. It sees the
    held-out outcomes of the other rows, so it is an optimistic version of a rule fitted on a training split: a
    stated confidence that does not beat it reads nothing the wording does not already tell."""
    corr = binarize(correct)
    keys = np.asarray(list(groups), dtype=object)
    if keys.shape != corr.shape:
        raise ValueError(f"groups ({keys.size}) and outcomes ({corr.size}) must have the same length")
    n = corr.size
    if n < 2:
        return np.full(n, 0.5)
    out = np.empty(n)
    overall = (corr.sum() - corr) / (n - 1)
    for key in dict.fromkeys(keys.tolist()):
        mask = keys == key
        size = int(mask.sum())
        out[mask] = (corr[mask].sum() - corr[mask]) / (size - 1) if size > 1 else overall[mask]
    return out


def correlation(confidences: Sequence[float], scores: Sequence[float], method: str = "pearson") -> float:
    """Pearson or Spearman correlation of confidence with a continuous score; NaN when either is constant."""
    conf, out = _arrays(confidences, scores)
    if conf.size < 2 or np.ptp(conf) == 0 or np.ptp(out) == 0:
        return float("nan")
    if method == "spearman":
        conf, out = _midranks(conf), _midranks(out)
    return float(np.corrcoef(conf, out)[0, 1])


def risk_coverage(confidences: Sequence[float], correct: Sequence[float]) -> tuple[np.ndarray, np.ndarray]:
    """Expected risk (error rate) of the k most confident rows, k = 1..N, against coverage k/N.

    Rows are taken most confident first; inside a run of equal confidences the expected error of a random pick
    is the run's error rate, so the curve is the expectation over tie-breaks."""
    conf, corr = _arrays(confidences, correct)
    n = conf.size
    if not n:
        return np.zeros(0), np.zeros(0)
    errors = 1.0 - (corr >= CORRECT_AT)
    _, inverse, counts = np.unique(-conf, return_inverse=True, return_counts=True)  # most confident first
    run_errors = np.bincount(inverse, weights=errors)
    run_start = np.concatenate([[0], np.cumsum(counts)[:-1]])
    errors_before = np.concatenate([[0.0], np.cumsum(run_errors)[:-1]])
    k = np.arange(1, n + 1)
    run = np.searchsorted(np.cumsum(counts), k, side="left")  # the run the k-th pick falls in
    expected_errors = errors_before[run] + (k - run_start[run]) * run_errors[run] / counts[run]
    return k / n, expected_errors / k


def aurc(confidences: Sequence[float], correct: Sequence[float]) -> float:
    """Area under the risk–coverage curve: the mean over k of the risk of the k most confident rows (lower is
    better; a constant confidence gives the error rate)."""
    _, risk = risk_coverage(confidences, correct)
    return float(risk.mean()) if risk.size else float("nan")


def selective_accuracy(confidences: Sequence[float], correct: Sequence[float], coverage: float) -> float:
    """Accuracy of the most confident ``coverage`` fraction of rows (at least one row)."""
    if not 0 < coverage <= 1:
        raise ValueError(f"coverage must be in (0, 1], got {coverage}")
    _, risk = risk_coverage(confidences, correct)
    if not risk.size:
        return float("nan")
    k = max(1, int(np.ceil(coverage * risk.size - 1e-9)))
    return float(1.0 - risk[k - 1])


def confidence_histogram(confidences: Sequence[float], n_bins: int = 10) -> list[int]:
    conf, _ = _arrays(confidences, np.zeros(len(confidences)))
    return np.bincount(equal_width_index(conf, n_bins), minlength=n_bins).tolist()


def calibration_report(confidences: Sequence[float], outcomes: Sequence[float], n_bins: int = 10) -> dict:
    """Every figure, by the names the logs, ``eval.json``, the report and wandb use. ``outcomes`` may be
    continuous (a judge's informativeness): the ranking and binned figures use correctness (score ≥ 0.5), Brier
    uses the score itself, and the correlations with the score are added."""
    conf, out = _arrays(confidences, outcomes)
    corr = binarize(out)
    murphy = murphy_decomposition(conf, corr, n_bins)
    continuous = bool(conf.size) and not np.array_equal(out, corr)
    report = {
        "accuracy": float(corr.mean()) if conf.size else float("nan"),
        "mean_confidence": float(conf.mean()) if conf.size else float("nan"),
        "confidence_std": float(conf.std()) if conf.size else float("nan"),
        "auroc": auroc(conf, corr),
        "ece": expected_calibration_error(conf, corr, n_bins, "width"),
        "ece_equal_mass": expected_calibration_error(conf, corr, n_bins, "mass"),
        "ece_floor": ece_floor(conf, n_bins),
        "mce": max_calibration_error(conf, corr, n_bins),
        "brier": brier_score(conf, out),
        "brier_binned": murphy.binned_brier,
        "reliability": murphy.reliability,
        "resolution": murphy.resolution,
        "uncertainty": murphy.uncertainty,
        "aurc": aurc(conf, corr),
        **{f"selective_accuracy@{round(c * 100)}": selective_accuracy(conf, corr, c) if conf.size
           else float("nan") for c in SELECTIVE_COVERAGES},
    }
    if continuous:
        report["informativeness_pearson"] = correlation(conf, out, "pearson")
        report["informativeness_spearman"] = correlation(conf, out, "spearman")
    return report


# ------------------------------------------------------------------------------------------------- plots

def _figure(size, **margins):
    """A figure with fixed margins: ``tight_layout`` would draw every figure once more to measure its text, and
    an evaluation writes two plots per condition (the largest part of a tiny oracle run's own work)."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure, SubplotParams

    fig = Figure(figsize=size, subplotpars=SubplotParams(**margins))
    FigureCanvasAgg(fig)
    return fig


def plot_reliability_diagram(confidences: Sequence[float], correct: Sequence[float], out_path, title: str = "",
                             n_bins: int = 10):
    """Accuracy against confidence per equal-width bin, with the confidence histogram under it."""
    conf, outcomes = _arrays(confidences, correct)
    corr = binarize(outcomes)
    bins = reliability_bins(conf, corr, n_bins)
    fig = _figure((5, 6.5), left=0.13, right=0.96, top=0.94, bottom=0.08, hspace=0.22)
    top, bottom = fig.subplots(2, 1, sharex=True, gridspec_kw={"height_ratios": [3, 1]})
    width = 1.0 / n_bins
    for b in bins:
        if b.count:
            top.bar(b.lower, b.accuracy, width=width, align="edge", edgecolor="black", color="tab:blue", alpha=0.7)
            top.plot([b.lower, b.upper], [b.mean_confidence] * 2, color="tab:red", linewidth=1)
    top.plot([0, 1], [0, 1], linestyle="--", color="gray", label="perfect calibration")
    top.plot([], [], color="tab:red", label="mean confidence in bin")
    top.set(xlim=(0, 1), ylim=(0, 1), ylabel="accuracy in bin",
            title=title or (f"ECE {expected_calibration_error(conf, corr, n_bins):.3f}  AUROC {auroc(conf, corr):.3f}"
                            f"  (n={len(conf)})"))
    top.title.set_fontsize(10)
    top.legend(loc="upper left", fontsize=8)
    bottom.bar([b.lower for b in bins], [b.count for b in bins], width=width, align="edge", edgecolor="black",
               color="tab:gray")
    bottom.set(xlabel="stated confidence", ylabel="rows",
               title=f"confidence histogram (std {conf.std() if conf.size else float('nan'):.3f})")
    bottom.title.set_fontsize(9)
    fig.savefig(out_path, dpi=100)
    return out_path


def plot_risk_coverage(confidences: Sequence[float], correct: Sequence[float], out_path, title: str = ""):
    """Error rate of the most confident rows against the fraction kept, beside a constant confidence's."""
    coverage, risk = risk_coverage(confidences, correct)
    fig = _figure((5, 4), left=0.14, right=0.96, top=0.91, bottom=0.12)
    ax = fig.add_subplot()
    if risk.size:
        ax.plot(coverage, risk, color="tab:blue", label=f"stated confidence (AURC {risk.mean():.3f})")
        ax.axhline(risk[-1], linestyle="--", color="gray", label=f"constant confidence ({risk[-1]:.3f})")
    ax.set(xlim=(0, 1), ylim=(0, max(0.05, float(risk.max()) * 1.1) if risk.size else 1), xlabel="coverage",
           ylabel="risk (error rate of rows kept)", title=title or f"risk-coverage (n={risk.size})")
    ax.title.set_fontsize(10)
    ax.legend(loc="upper left", fontsize=8)
    fig.savefig(out_path, dpi=100)
    return out_path


def kind_headroom(outcomes: Sequence[float], kinds: Sequence[str]) -> dict[str, float]:
    """What a confidence could gain by knowing the question kind: the Brier of the best constant confidence (the
    accuracy) minus the Brier of each kind's own accuracy, with each kind's accuracy beside it."""
    correct = binarize(outcomes)
    if not correct.size:
        return {}
    names, inverse, counts = np.unique(np.asarray(kinds, dtype=str), return_inverse=True, return_counts=True)
    accuracy = np.bincount(inverse, weights=correct) / counts
    base = correct.mean()
    per_kind = float(np.sum(counts / correct.size * accuracy * (1 - accuracy)))
    return {"brier_best_constant": float(base * (1 - base)), "brier_per_kind": per_kind,
            "headroom": float(base * (1 - base)) - per_kind,
            **{f"accuracy_kind/{name}": float(acc) for name, acc in zip(names, accuracy)}}
