"""The oracle pipeline from the command line: SFT warm-up with injection -> GRPO with the label judge -> eval."""

from __future__ import annotations

import json
import re

from tests.conftest import run_cli
from tests.test_e2e import assert_ok, read_jsonl


def test_oracle_pipeline_run_directory(tmp_path):
    out = tmp_path / "oracle"
    assert_ok(run_cli("ao_calib.run", "experiment=oracle_tiny", f"hydra.run.dir={out}"))
    rows = read_jsonl(out / "metrics.jsonl")
    assert {r["stage"] for r in rows} == {"warmup", "train"}
    grpo = [r for r in rows if r["stage"] == "train" and "reward" in r]
    assert len(grpo) == 2
    for key in ("rewards/calibration/mean", "oracle/brier", "oracle/informativeness", "oracle/confidence_mean",
                "oracle/confidence_std", "oracle/advantage_std", "oracle/answer_length",
                "oracle/parse_failure_rate", "kl"):
        assert key in grpo[-1], key
    for tag in ("warmup", "final"):
        report = json.loads((out / ("eval.json" if tag == "final" else f"eval_{tag}.json")).read_text())
        assert {"accuracy", "ece", "mce", "brier", "parse_rate"} <= report["metrics"].keys()
        assert "control" in report["variants"]
        assert (out / f"reliability_{tag}.png").read_bytes()[:4] == b"\x89PNG"
    summary = json.loads((out / "summary.json").read_text())
    assert summary["status"] == "completed" and "brier" in summary["eval_metrics"]

    # A second run (a sweep job, a rerun) reads every activation from the cache instead of the model.
    again = tmp_path / "again"
    assert_ok(run_cli("ao_calib.run", "experiment=oracle_tiny", "trainer.max_steps=1", "warmup.max_steps=1",
                      "eval.enabled=false", f"hydra.run.dir={again}"))
    texts, cached = map(int, re.search(r"activations: (\d+) texts, (\d+) cached",
                                       (again / "run.log").read_text()).groups())
    assert texts == cached > 0


def test_unknown_judge_for_oracle_is_a_clear_error(tmp_path):
    result = run_cli("ao_calib.run", "experiment=oracle_tiny", "judge=none", f"hydra.run.dir={tmp_path / 'x'}")
    assert result.returncode == 2 and "task=oracle needs a judge" in result.stderr
