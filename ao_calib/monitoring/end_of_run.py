"""Alerts about stated confidence (see ``ao_calib.monitoring.alerts`` and ``ao_calib.monitoring.callback`` for the mechanism): confidences collapsed to
one value, and answers shrinking while the confidence holds (the vague-answer exploit); and, once at the end of a run,
the main stage's confidence ranking or calibrating worse than the warm-up's did (:func:`calibration_regression`)."""

from __future__ import annotations

import math

from ao_calib.core.command_names import command
from ao_calib.monitoring.alerts import Alert, below


def calibration_alerts(cfg) -> list[Alert]:
    """``cfg`` is the run's ``alerts`` node. Each condition reads a ``calibration/*`` figure, so it stays silent
    for tasks that state no confidence."""
    first_length: list[float] = []

    def shrinking(logs: dict):
        value = logs.get("calibration/answer_length")
        if value is None:
            return None
        if not first_length:
            first_length.append(value)
        if first_length[0] and value / first_length[0] < cfg.answer_length_drop:
            return value / first_length[0], cfg.answer_length_drop
        return None

    return [
        Alert("confidence_collapse", "confidence std {value:.3f} < {threshold}: confidences collapsed to one value, "
                                     "which cannot tell right from wrong (AUROC 0.5); lower trainer.lr, raise "
                                     "trainer.beta or trainer.temperature",
              below("calibration/confidence_std", cfg.confidence_std_below)),
        Alert("vague_answers", "mean answer length fell to {value:.0%} of its start (< {threshold:.0%}): "
                               "vague-answer exploit? Read completions.jsonl; raise "
                               "task.calibration.lam if answers hedge", shrinking),
    ]


def _figure(metrics: dict, key: str) -> float | None:
    value = metrics.get(key)
    return float(value) if isinstance(value, (int, float)) and not math.isnan(value) else None


def calibration_regression(before: dict, after: dict, cfg, run_dir: str = "RUN") -> str | None:
    """The message of the ``calibration_regressed`` alert, or None: ``before`` and ``after`` are the ``metrics`` of
    the warm-up's and the main stage's evaluations (the same held-out rows), ``cfg`` the run's ``alerts`` node,
    ``run_dir`` the run's directory (for the command the message gives).
    Training can raise the reward (accuracy) while the stated number drifts away from it, which the per-step alerts
    do not see: a number stated at 95 on every row of a kind is neither collapsed nor short. Silent when either
    evaluation states no confidence (no AUROC or ECE)."""
    worse = []
    auroc = _figure(before, "auroc"), _figure(after, "auroc")
    if None not in auroc and auroc[0] - auroc[1] > cfg.auroc_drop_after_warmup:
        worse.append(f"AUROC {auroc[0]:.3f} -> {auroc[1]:.3f} (a fall over {cfg.auroc_drop_after_warmup})")
    ece = _figure(before, "ece"), _figure(after, "ece")
    if None not in ece and ece[1] - ece[0] > cfg.ece_rise_after_warmup:
        worse.append(f"ECE {ece[0]:.3f} -> {ece[1]:.3f} (a rise over {cfg.ece_rise_after_warmup})")
    if not worse:
        return None
    return ("the stated confidence is worse after the main stage than after the warm-up, on the same held-out rows: "
            + ", ".join(worse) + ". Compare the warm-up's last checkpoint (warmup/checkpoints/) and the main stage's "
            f"(checkpoints/) on the validation split, `{command('eval')} run_dir={run_dir} adapter=CHECKPOINT "
            "tag=NAME task.data.eval_split=validation`, and score the one chosen on the test split once; or move "
            "training less far (lower trainer.lr, raise trainer.beta)")
