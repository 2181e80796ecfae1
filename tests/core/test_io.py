"""ao_calib.core.io's JSON writers: JSON lines, and JSON files any strict parser reads (no NaN)."""

import json
import math

import numpy as np

from ao_calib.core.io import nulls_as_nan, write_json, write_jsonl


def test_write_jsonl_replaces_the_file_with_one_json_line_per_record(tmp_path):
    records = [{"a": 1, "b": [True, None]}, {"path": tmp_path}]  # default=str: a Path is written as its text
    written = tmp_path / "written.jsonl"
    written.write_text('{"old": 1}\n' * 5)
    write_jsonl(written, records)
    lines = written.read_text().splitlines()
    assert [json.loads(line) for line in lines] == [{"a": 1, "b": [True, None]}, {"path": str(tmp_path)}]
    assert written.read_text().endswith("\n")
    assert not list(tmp_path.glob(".*.tmp"))  # no temporary file left behind


def test_write_json_writes_null_for_a_figure_that_is_not_a_number(tmp_path):
    figures = {"auroc": float("nan"), "ece": 0.5, "kinds": [float("inf"), -math.inf, 1], "step": 3,
               "numpy": np.float32("nan"), "numpy_ok": np.float64(0.25), "nested": {"t": (math.nan, 2.0)}}
    path = tmp_path / "eval.json"
    write_json(path, figures)
    strict = json.loads(path.read_text(), parse_constant=lambda c: 1 / 0)  # NaN/Infinity would raise
    assert strict == {"auroc": None, "ece": 0.5, "kinds": [None, None, 1], "step": 3, "numpy": None,
                      "numpy_ok": 0.25, "nested": {"t": [None, 2.0]}}
    back = nulls_as_nan(strict)  # a reader that formats or averages gets NaN again
    assert math.isnan(back["auroc"]) and math.isnan(back["nested"]["t"][0]) and back["ece"] == 0.5
