"""Failure-mode alerts fire once, after their patience, and only on their condition."""

from __future__ import annotations

from types import SimpleNamespace

from omegaconf import OmegaConf

from ao_calib.calibration.alerts import calibration_alerts
from ao_calib.config import AlertsConfig
from ao_calib.trainers.alerts import AlertCallback, training_alerts


def callback(**thresholds):
    cfg = OmegaConf.structured(AlertsConfig(**thresholds))
    return AlertCallback([*training_alerts(cfg), *calibration_alerts(cfg)], cfg.patience)


def feed(cb, rows):
    for step, logs in enumerate(rows, start=1):
        cb.on_log(None, SimpleNamespace(global_step=step, is_world_process_zero=True), None, logs=dict(logs))


def test_each_alert_fires_once_after_patience():
    cb = callback(patience=2)
    healthy = {"calibration/confidence_std": 0.2, "advantage_std": 0.5, "calibration/answer_length": 40.0,
               "kl": 0.1}
    sick = {"calibration/confidence_std": 0.01, "advantage_std": 0.0, "calibration/answer_length": 10.0,
            "kl": 5.0}
    feed(cb, [healthy, sick, healthy, sick, sick, sick, sick])
    assert set(cb.fired) == {"confidence_collapse", "no_learning_signal", "vague_answers", "kl_explosion"}
    assert {info["step"] for info in cb.fired.values()} == {5}  # the single sick step at 2 did not count


def test_no_alert_on_a_healthy_run_and_the_log_carries_the_flag():
    cb = callback(patience=1)
    feed(cb, [{"calibration/confidence_std": 0.3, "kl": 0.2, "calibration/answer_length": 30.0}] * 5)
    assert cb.fired == {}
    logs = {"kl": 3.0}
    cb.on_log(None, SimpleNamespace(global_step=9, is_world_process_zero=True), None, logs=logs)
    assert logs["alert/kl_explosion"] == 1.0 and cb.fired["kl_explosion"]["step"] == 9


def test_calibration_alerts_stay_silent_without_confidence_figures():
    cb = callback(patience=1)
    feed(cb, [{"advantage_std": 0.4, "kl": 0.1}] * 4)  # a function-calling run states no confidence
    assert cb.fired == {}
