"""Failure-mode alerts fire once, after their patience, and only on their condition."""

from __future__ import annotations

from types import SimpleNamespace

from ao_calib.alerts import AlertCallback, AlertThresholds


def feed(callback, rows):
    for step, logs in enumerate(rows, start=1):
        callback.on_log(None, SimpleNamespace(global_step=step), None, logs=dict(logs))


def test_each_alert_fires_once_after_patience():
    cb = AlertCallback(AlertThresholds(patience=2))
    healthy = {"oracle/confidence_std": 0.2, "oracle/advantage_std": 0.5, "oracle/answer_length": 40.0, "kl": 0.1}
    sick = {"oracle/confidence_std": 0.01, "oracle/advantage_std": 0.0, "oracle/answer_length": 10.0, "kl": 5.0}
    feed(cb, [healthy, sick, healthy, sick, sick, sick, sick])
    assert set(cb.fired) == {"confidence_collapse", "no_learning_signal", "vague_answers", "kl_explosion"}
    assert {info["step"] for info in cb.fired.values()} == {5}  # the single sick step at 2 did not count


def test_no_alert_on_a_healthy_run_and_the_log_carries_the_flag():
    cb = AlertCallback(AlertThresholds(patience=1))
    feed(cb, [{"oracle/confidence_std": 0.3, "kl": 0.2, "oracle/answer_length": 30.0}] * 5)
    assert cb.fired == {}
    logs = {"kl": 3.0}
    cb.on_log(None, SimpleNamespace(global_step=9), None, logs=logs)
    assert logs["alert/kl_explosion"] == 1.0 and cb.fired["kl_explosion"]["step"] == 9
