"""Failure-mode alerts while an online trainer trains. Each alert fires at most once per run, after its condition
held ``patience`` logged steps in a row: it is logged, printed, recorded in ``metrics.jsonl`` (``alert/<name>``)
and listed in ``summary.json``. The conditions that hold for every task live here; those about stated
confidence live in ``ao_calib.monitoring.end_of_run``; what an alert is, in ``ao_calib.monitoring.alerts``."""

from __future__ import annotations

import json
import logging
from collections.abc import Sequence
from pathlib import Path

from transformers import TrainerCallback

from ao_calib.monitoring.alerts import Alert, above, below_any

log = logging.getLogger(__name__)


def training_alerts(cfg) -> list[Alert]:
    """The alerts of every online trainer (``cfg`` is the run's ``alerts`` node)."""
    return [
        Alert("no_learning_signal", "advantage std {value:.2e} < {threshold}: all completions in a group score alike "
                                    "(every reward equal: no learning signal); check the rewards on completions.jsonl, "
                                    "or teach the output format first (warmup=sft)",
              below_any(("advantage_std", "reward_spread"), cfg.advantage_std_below)),
        Alert("kl_explosion", "KL {value:.3f} > {threshold}: reduce the learning rate or raise beta",
              above("kl", cfg.kl_above)),
    ]


def record_alert(path: Path | None, step: int, name: str, message: str) -> None:
    """Appends a fired alert to the run's alerts file (``RunDir.alerts``), so the summary lists it even when the
    run was resumed after it fired."""
    if path is not None:
        with Path(path).open("a") as f:
            f.write(json.dumps({"step": step, "name": name, "message": message}) + "\n")


class AlertCallback(TrainerCallback):
    def __init__(self, alerts: Sequence[Alert], patience: int, record_to: Path | None = None):
        self.alerts, self.patience = list(alerts), patience
        self.record_to = record_to
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
                if self.record_to is not None and state.is_world_process_zero:
                    record_alert(self.record_to, state.global_step, alert.name, message)
                log.warning("ALERT at step %d: %s", state.global_step, message)
                if state.is_world_process_zero:  # one voice for the run; each process keeps its streaks
                    print(f"\n[alert] step {state.global_step}: {message}", flush=True)
                logs[f"alert/{alert.name}"] = 1.0


class JudgeOutageCallback(TrainerCallback):
    """A logged step where the judge masked every sample (``judge/masked`` equals ``judge/items``) has no reward
    at all: alert at once, and after ``stop_after`` such steps in a row stop training with ``stop_reason`` naming
    the judge and its last error (the run then ends "failed")."""

    def __init__(self, stop_after: int | None, record_to: Path | None = None):
        self.stop_after = stop_after
        self.record_to = record_to
        self.fired: dict[str, dict] = {}
        self.stop_reason: str | None = None
        self._streak = 0

    def on_log(self, args, state, control, logs=None, **kwargs):
        items, masked = (logs or {}).get("judge/items"), (logs or {}).get("judge/masked")
        if not items or masked is None:
            return
        self._streak = self._streak + 1 if masked >= items else 0
        if not self._streak:
            return
        from ao_calib.judges.base import last_failure

        judge, error = last_failure() or ("the judge", "unknown")
        message = (f"judge outage: {judge} masked every sample of the step ({self._streak} step(s) in a row; last "
                   f"error: {error}); no reward reaches the policy. Check the judge server or judge.api_base")
        logs["alert/judge_outage"] = 1.0
        if "judge_outage" not in self.fired:
            self.fired["judge_outage"] = {"step": state.global_step, "message": message}
            if self.record_to is not None and state.is_world_process_zero:
                record_alert(self.record_to, state.global_step, "judge_outage", message)
            log.warning("ALERT at step %d: %s", state.global_step, message)
            if state.is_world_process_zero:
                print(f"\n[alert] step {state.global_step}: {message}", flush=True)
        if self.stop_after and self._streak >= self.stop_after:
            self.stop_reason = (f"stopped at step {state.global_step}: judge {judge} masked every sample for "
                                f"{self._streak} steps in a row (alerts.judge_outage_stop_after="
                                f"{self.stop_after}); last error: {error}")
            control.should_training_stop = True
