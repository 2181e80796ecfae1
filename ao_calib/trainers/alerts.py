"""Failure-mode alerts while an online trainer trains. Each alert fires at most once per run, after its condition
held ``patience`` logged steps in a row: it is logged, printed, recorded in ``metrics.jsonl`` (``alert/<name>``)
and listed in ``summary.json``. The conditions that hold for every task live here; those about stated
confidence live in ``ao_calib.calibration.alerts``."""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from transformers import TrainerCallback

log = logging.getLogger(__name__)


@dataclass
class Alert:
    """``check(logs)`` returns ``(value, threshold)`` when the condition holds on one logged step, else None."""

    name: str
    message: str  # formatted with value and threshold
    check: Callable[[dict], "tuple[float, float] | None"]


def below(key: str, threshold: float) -> Callable[[dict], tuple[float, float] | None]:
    return lambda logs: (logs[key], threshold) if logs.get(key) is not None and logs[key] < threshold else None


def above(key: str, threshold: float) -> Callable[[dict], tuple[float, float] | None]:
    return lambda logs: (logs[key], threshold) if logs.get(key) is not None and logs[key] > threshold else None


def training_alerts(cfg) -> list[Alert]:
    """The alerts of every online trainer (``cfg`` is the run's ``alerts`` node)."""
    return [
        Alert("no_learning_signal", "advantage std {value:.2e} < {threshold}: all completions in a group score alike",
              below("advantage_std", cfg.advantage_std_below)),
        Alert("kl_explosion", "KL {value:.3f} > {threshold}: reduce the learning rate or raise beta",
              above("kl", cfg.kl_above)),
    ]


class AlertCallback(TrainerCallback):
    def __init__(self, alerts: Sequence[Alert], patience: int):
        self.alerts, self.patience = list(alerts), patience
        self.fired: dict[str, dict] = {}
        self._streak: dict[str, int] = {}

    def on_log(self, args, state, control, logs=None, **kwargs):
        if not logs:
            return
        for alert in self.alerts:
            found = alert.check(logs)
            self._streak[alert.name] = self._streak.get(alert.name, 0) + 1 if found else 0
            if found and alert.name not in self.fired and self._streak[alert.name] >= self.patience:
                message = alert.message.format(value=found[0], threshold=found[1])
                self.fired[alert.name] = {"step": state.global_step, "message": message}
                log.warning("ALERT at step %d: %s", state.global_step, message)
                print(f"\n[alert] step {state.global_step}: {message}", flush=True)
                logs[f"alert/{alert.name}"] = 1.0
