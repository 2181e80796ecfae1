"""Failure-mode alerts fire once, after their patience, and only on their condition."""

from __future__ import annotations

from types import SimpleNamespace

from omegaconf import OmegaConf

from ao_calib.monitoring.callback import AlertCallback, training_alerts
from ao_calib.monitoring.config import AlertsConfig
from ao_calib.monitoring.end_of_run import calibration_alerts


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


def test_calibration_regression_names_each_figure_that_got_worse_and_only_past_its_threshold():
    from ao_calib.monitoring.end_of_run import calibration_regression

    cfg = OmegaConf.structured(AlertsConfig())
    warmup = {"auroc": 0.817, "ece": 0.034}
    # The README's quickstart seed: the city number driven to 95+ while accuracy rose
    message = calibration_regression(warmup, {"auroc": 0.502, "ece": 0.174}, cfg)
    assert "AUROC 0.817 -> 0.502" in message and "ECE 0.034 -> 0.174" in message
    assert "task.data.eval_split=validation" in message
    only_ece = calibration_regression(warmup, {"auroc": 0.80, "ece": 0.09}, cfg)
    assert "ECE 0.034 -> 0.090" in only_ece and "AUROC" not in only_ece
    # a fall of 0.09 and a rise of 0.04: within the thresholds; a better number: silent
    assert calibration_regression(warmup, {"auroc": 0.727, "ece": 0.074}, cfg) is None
    assert calibration_regression(warmup, {"auroc": 0.9, "ece": 0.01}, cfg) is None
    # the thresholds are the run's keys
    strict = OmegaConf.structured(AlertsConfig(auroc_drop_after_warmup=0.01, ece_rise_after_warmup=0.5))
    assert "AUROC 0.817 -> 0.780" in calibration_regression(warmup, {"auroc": 0.78, "ece": 0.5}, strict)


def test_calibration_regression_is_silent_where_no_confidence_is_stated():
    from ao_calib.monitoring.end_of_run import calibration_regression

    cfg = OmegaConf.structured(AlertsConfig())
    assert calibration_regression({"ast_accuracy": 0.8}, {"ast_accuracy": 0.1}, cfg) is None  # function calls
    nan = float("nan")  # AUROC of rows all right: no figure, not a fall
    assert calibration_regression({"auroc": 0.9, "ece": nan}, {"auroc": nan, "ece": 0.2}, cfg) is None


def test_the_end_of_run_check_records_its_alert_once_and_the_closing_block_shows_it(tmp_path, capsys):
    import json

    from ao_calib.reporting.summary import print_final_screen
    from ao_calib.run import _check_calibration_regression
    from ao_calib.runs.run_dir import WARMUP, RunDir

    run = RunDir(tmp_path)
    cfg = OmegaConf.create({"alerts": OmegaConf.structured(AlertsConfig())})
    _check_calibration_regression(cfg, run, 150)  # no evaluations yet: nothing to compare
    assert run.fired_alerts() == {}
    for tag, metrics in ((WARMUP, {"auroc": 0.817, "ece": 0.034}), (RunDir.FINAL, {"auroc": 0.502, "ece": 0.174})):
        run.eval_report(tag).write_text(json.dumps({"tag": tag, "metrics": {"accuracy": 0.7, **metrics}}))
    _check_calibration_regression(cfg, run, 150)
    _check_calibration_regression(cfg, run, 150)  # a resumed run's second final evaluation: not recorded twice
    assert len(run.alerts.read_text().splitlines()) == 1
    fired = run.fired_alerts()
    assert set(fired) == {"calibration_regressed"} and fired["calibration_regressed"]["step"] == 150
    print_final_screen({"status": "completed", "wall_time_s": 3.0, "final_metrics": {"reward": 0.6},
                        "run_dir": str(tmp_path), "alerts": fired})
    out = capsys.readouterr().out
    assert "ALERT calibration_regressed (step 150): the stated confidence is worse after the main stage" in out
    assert f"python -m ao_calib.eval run_dir={tmp_path} adapter=CHECKPOINT" in out  # a command to copy
