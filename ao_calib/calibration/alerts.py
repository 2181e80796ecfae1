"""Alerts about stated confidence (see ``ao_calib.alerts`` and ``ao_calib.trainers.alerts`` for the mechanism): confidences collapsed to
one value, and answers shrinking while the confidence holds (the vague-answer exploit)."""

from __future__ import annotations

from ao_calib.alerts import Alert, below


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
