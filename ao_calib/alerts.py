"""Failure-mode alerts for oracle GRPO, from the seed's monitoring list. Each fires at most once per run: it is
logged, printed, recorded in ``metrics.jsonl`` (``alert/<name>``) and listed in ``summary.json``."""

from __future__ import annotations

import logging
from dataclasses import dataclass

from transformers import TrainerCallback

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class AlertThresholds:
    confidence_std_below: float = 0.1  # confidences collapsed to one value (std of confidence/100)
    advantage_std_below: float = 1e-3  # every group scored alike: no learning signal
    answer_length_drop: float = 0.5  # mean answer length fell below this fraction of its first value
    kl_above: float = 1.0  # drifting from the reference: lower the lr or raise beta
    patience: int = 3  # consecutive logged steps a condition must hold (one noisy step is not a failure)


MESSAGES = {
    "confidence_collapse": "confidence std {value:.3f} < {threshold}: confidences collapsed to one value",
    "no_learning_signal": "advantage std {value:.2e} < {threshold}: all completions in a group score alike",
    "vague_answers": "mean answer length fell to {value:.0%} of its start (< {threshold:.0%}): "
                     "vague-answer exploit?",
    "kl_explosion": "KL {value:.3f} > {threshold}: reduce the learning rate or raise beta",
}


class AlertCallback(TrainerCallback):
    def __init__(self, thresholds: AlertThresholds):
        self.t = thresholds
        self.fired: dict[str, dict] = {}
        self._streak: dict[str, int] = {}
        self._first_length: float | None = None

    def _conditions(self, logs: dict) -> dict[str, tuple[float, float]]:
        found = {}
        if (v := logs.get("oracle/confidence_std")) is not None and v < self.t.confidence_std_below:
            found["confidence_collapse"] = (v, self.t.confidence_std_below)
        if (v := logs.get("oracle/advantage_std")) is not None and v < self.t.advantage_std_below:
            found["no_learning_signal"] = (v, self.t.advantage_std_below)
        if (v := logs.get("oracle/answer_length")) is not None:
            self._first_length = self._first_length or v
            if self._first_length and v / self._first_length < self.t.answer_length_drop:
                found["vague_answers"] = (v / self._first_length, self.t.answer_length_drop)
        if (v := logs.get("kl")) is not None and v > self.t.kl_above:
            found["kl_explosion"] = (v, self.t.kl_above)
        return found

    def on_log(self, args, state, control, logs=None, **kwargs):
        if not logs:
            return
        found = self._conditions(logs)
        for name in MESSAGES:
            self._streak[name] = self._streak.get(name, 0) + 1 if name in found else 0
            if name in found and name not in self.fired and self._streak[name] >= self.t.patience:
                value, threshold = found[name]
                message = MESSAGES[name].format(value=value, threshold=threshold)
                self.fired[name] = {"step": state.global_step, "message": message}
                log.warning("ALERT at step %d: %s", state.global_step, message)
                print(f"\n[alert] step {state.global_step}: {message}", flush=True)
                logs[f"alert/{name}"] = 1.0
