"""``eval.select_metric`` is checked against the names a task says its evaluation reports (``metric_names``): every
figure an oracle or BFCL evaluation's ``aggregate`` returns must be among them, or a user could not select on it."""

from __future__ import annotations

import math

from ao_calib.config.compose import compose_run_config
from ao_calib.evaluation.selection import check_metric_name
from ao_calib.runs.run_dir import RunDir
from ao_calib.task_api import build_task


def test_every_oracle_figure_can_be_selected_on(tmp_path):
    task = build_task(compose_run_config(["experiment=oracle_tiny"]))
    completions = ["[epistemic status: 80] Yes", "[epistemic status: 30] No", "Yes", "[epistemic status: 60] No"]
    rows = [{"answer": a, "question": q} for a, q in (("Yes", "Is it?"), ("Yes", "Is it?"), ("No", "Was it?"),
                                                      ("No", "Was it?"))]
    records = [{"scores": task.score_one(c, r), "question": r["question"], "condition": "own"}
               for c, r in zip(completions, rows)]
    figures = task.aggregate(records, RunDir(tmp_path), "final")
    assert {"parse_rate", "calibration_reward", "ece", "auroc"} <= set(figures)
    assert set(figures) <= task.metric_names(), set(figures) - task.metric_names()
    check_metric_name("parse_rate", task)  # refused before metric_names named it


def test_every_bfcl_category_figure_can_be_selected_on(tmp_path):
    task = build_task(compose_run_config(["task=function_call", "model=tiny_qwen3", "task.data.format=bfcl"]))
    names = (task.headline_metric, *task.reward_functions(None))
    records = [{"kind": kind, "scores": {name: float(hit) for name in names}}
               for kind, hit in (("simple", 1), ("multiple", 0), ("irrelevance", 1), ("parallel", 0))]
    records = [{**r, "completion": "[]" if r["kind"] == "simple" else "f(x=1)"} for r in records]
    figures = task.aggregate(records, RunDir(tmp_path), "final")
    assert {"ast_accuracy/simple", "ast_accuracy/category_mean", "empty_where_call_needed"} <= set(figures)
    assert set(figures) <= task.metric_names(), set(figures) - task.metric_names()
    assert not any(isinstance(v, float) and math.isnan(v) for v in figures.values())
