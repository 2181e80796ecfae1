"""Run-directory readers, the sweep report and the per-run training plot, on fake run directories."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from ao_calib.reporting.plot import group_keys, plot_run
from ao_calib.reporting.report import main, records_frame, write_report
from ao_calib.runs.records import RunDirError, find_run_dirs, load_run, load_runs, read_metrics, read_overrides
from tests.helpers.fake_runs import make_run, metric_steps

REPO = Path(__file__).resolve().parents[2]
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def report_frame(root: Path) -> pd.DataFrame:
    """The table ``write_report`` and the CLI write for ``root``."""
    return records_frame(load_runs(root))


@pytest.fixture()
def sweep(tmp_path: Path) -> Path:
    root = tmp_path / "multirun"
    root.mkdir()
    (root / "multirun.yaml").write_text("hydra: {}\n")
    make_run(
        root / "trainer.beta=0.0,trainer.lr=1e-05",
        ["task=function_call", "trainer.beta=0.0", "trainer.lr=1e-05", "hydra.job.num=0"],
        metrics=metric_steps(3, 0.4) + [{"step": 3, "eval/exact_match": 0.25}, {"step": 3, "train_runtime": 12.0}],
        summary={"status": "completed", "wall_time_s": 123.4, "final_metrics": {}, "git_commit": "abc"},
        eval_metrics={"exact_match": 0.3, "tool_call_function": 0.6},
    )
    make_run(
        root / "trainer.beta=0.04,trainer.lr=1e-05",
        ["task=function_call", "trainer.beta=0.04", "+trainer.lr=1e-05", "hydra.job.num=1"],
        metrics=metric_steps(2, 0.2) + [{"step": 3, "reward": None}],
        summary={"status": "failed", "wall_time_s": 5.0, "error": "RuntimeError: CUDA out of memory\nmore"},
    )
    make_run(  # killed mid-write: truncated last line, no summary
        root / "trainer.beta=0.0,trainer.lr=1e-04",
        ["task=function_call", "trainer.beta=0.0", "++trainer.lr=1e-04", "hydra.job.num=2"],
        metrics=metric_steps(4, 0.1),
        tail='{"step": 5, "loss": 0.0',
    )
    make_run(  # died before logging anything; "running" left behind by a dead process
        root / "trainer.beta=0.04,trainer.lr=1e-04",
        ["task=function_call", "trainer.beta=0.04", "trainer.lr=1e-04", "hydra.job.num=3"],
        summary={"status": "running"},
    )
    (root / "trainer.beta=0.0,trainer.lr=1e-05" / "checkpoints" / "step-3").mkdir(parents=True)
    (root / "trainer.beta=0.0,trainer.lr=1e-05" / "checkpoints" / "step-3" / "summary.json").write_text("{}")
    return root


def test_readers(sweep: Path) -> None:
    runs = find_run_dirs(sweep)
    assert [r.name for r in runs] == sorted(r.name for r in runs)
    assert len(runs) == 4  # checkpoints/ inside a run is not a run
    killed = sweep / "trainer.beta=0.0,trainer.lr=1e-04"
    assert len(read_metrics(killed)) == 4
    assert read_overrides(killed)[2] == "++trainer.lr=1e-04"
    record = load_run(killed)
    assert record.status == "unfinished" and record.skipped_metric_lines == 1
    assert record.overrides["trainer.lr"] == "1e-04" and record.steps == 4
    assert record.final_reward == pytest.approx(0.14)
    assert find_run_dirs(killed) == [killed]
    assert find_run_dirs(sweep / "nope") == []


def test_report_frame(sweep: Path) -> None:
    df = report_frame(sweep).set_index("run")
    assert list(df.index) == sorted(df.index)
    status = df["status"].to_dict()
    assert status == {
        "trainer.beta=0.0,trainer.lr=1e-04": "unfinished",
        "trainer.beta=0.0,trainer.lr=1e-05": "completed",
        "trainer.beta=0.04,trainer.lr=1e-04": "unfinished",
        "trainer.beta=0.04,trainer.lr=1e-05": "failed",
    }
    # Swept columns are exactly the keys that differ (task is constant, hydra.* never counts).
    fixed = {"status", "final_reward", "wall_time_s", "steps", "error"}
    swept = [c for c in df.columns if c not in fixed and not c.startswith(("eval/", "train/"))]
    assert swept == ["trainer.beta", "trainer.lr"]
    done = df.loc["trainer.beta=0.0,trainer.lr=1e-05"]
    assert done["trainer.beta"] == "0.0" and done["trainer.lr"] == "1e-05"
    assert done["final_reward"] == pytest.approx(0.43)
    assert done["eval/exact_match"] == pytest.approx(0.3)
    assert done["eval/tool_call_function"] == pytest.approx(0.6)
    assert done["wall_time_s"] == pytest.approx(123.4) and done["steps"] == 3
    failed = df.loc["trainer.beta=0.04,trainer.lr=1e-05"]
    assert failed["final_reward"] == pytest.approx(0.22)  # last non-null reward
    assert failed["error"].startswith("RuntimeError: CUDA out of memory")
    assert pd.isna(failed["eval/exact_match"])
    empty = df.loc["trainer.beta=0.04,trainer.lr=1e-04"]
    assert pd.isna(empty["final_reward"]) and pd.isna(empty["steps"]) and pd.isna(empty["wall_time_s"])


def test_single_run_uses_all_override_keys(sweep: Path) -> None:
    df = report_frame(sweep / "trainer.beta=0.0,trainer.lr=1e-05")
    assert len(df) == 1 and df["run"][0] == "trainer.beta=0.0,trainer.lr=1e-05"
    assert {"task", "trainer.beta", "trainer.lr"} <= set(df.columns)
    assert df["wall_time_s"][0] == pytest.approx(123.4)


def test_write_report_files(sweep: Path, tmp_path: Path) -> None:
    paths = write_report(sweep)
    assert set(paths) == {"csv", "md", "png"}
    assert all(p.parent == sweep and p.is_file() for p in paths.values())
    png = paths["png"].read_bytes()
    assert png.startswith(PNG_MAGIC) and len(png) > 1000
    csv = pd.read_csv(paths["csv"])
    assert len(csv) == 4 and "eval/exact_match" in csv.columns
    md = paths["md"].read_text()
    assert "**failed**" in md and "_unfinished_" in md and "—" in md
    assert "CUDA out of memory" in md and "| run" in md
    other = write_report(sweep, tmp_path / "elsewhere")
    assert other["md"].parent == tmp_path / "elsewhere" and other["png"].is_file()


def test_reward_curves_without_metrics(tmp_path: Path) -> None:
    make_run(tmp_path / "a", ["x=1"], summary={"status": "failed", "error": "boom"})
    make_run(tmp_path / "b", ["x=2"], summary={"status": "completed"})
    png = write_report(tmp_path)["png"].read_bytes()
    assert png.startswith(PNG_MAGIC) and len(png) > 0


def test_cli(sweep: Path, tmp_path: Path) -> None:
    out = tmp_path / "out"
    proc = subprocess.run(
        [sys.executable, "-m", "ao_calib.report", str(sweep), "--out", str(out)],
        cwd=REPO, capture_output=True, text=True, timeout=60,
    )
    assert proc.returncode == 0, proc.stderr
    for name in ("trainer.beta=0.0,trainer.lr=1e-05", "trainer.beta=0.04,trainer.lr=1e-05",
                 "trainer.beta=0.0,trainer.lr=1e-04", "trainer.beta=0.04,trainer.lr=1e-04"):
        assert name in proc.stdout
    assert (out / "report.csv").is_file() and str(out / "report.md") in proc.stdout


def test_cli_errors(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    empty = tmp_path / "empty"
    (empty / "sub").mkdir(parents=True)
    proc = subprocess.run(
        [sys.executable, "-m", "ao_calib.report", str(empty)],
        cwd=REPO, capture_output=True, text=True, timeout=60,
    )
    assert proc.returncode == 2
    assert "no run directory" in proc.stderr and len(proc.stderr.strip().splitlines()) == 1
    assert main([str(tmp_path / "missing")]) == 2
    assert "no such file" in capsys.readouterr().err
    with pytest.raises(RunDirError):
        load_runs(empty)


def test_plot_run(sweep: Path, tmp_path: Path) -> None:
    run = sweep / "trainer.beta=0.0,trainer.lr=1e-05"
    paths = plot_run(run)
    assert paths == [run / "plots" / "training_curves.png"]
    assert paths[0].read_bytes().startswith(PNG_MAGIC)
    groups = group_keys(read_metrics(run))
    assert list(groups) == ["loss", "reward", "eval / validation", "KL", "learning rate"]
    assert groups["reward"] == ["reward", "rewards/tool_call_exact/mean"]
    assert groups["eval / validation"] == ["eval/exact_match"]  # train_runtime is not plotted

    # Another task's keys: only reward and eval_ groups exist; the others are skipped.
    other = tmp_path / "other_run"
    other.mkdir()
    rows = [{"step": 1, "reward": 0.5, "rewards/judge/mean": 0.5, "loss": None},
            {"step": 2, "eval_accuracy": 0.7, "eval_runtime": 3.0}]
    (other / "metrics.jsonl").write_text("\n".join(json.dumps(r) for r in rows) + "\n{trunc")
    assert list(group_keys(read_metrics(other))) == ["reward", "eval / validation"]
    out = plot_run(other, tmp_path / "custom.png")
    assert out == [tmp_path / "custom.png"] and out[0].read_bytes().startswith(PNG_MAGIC)

    nothing = tmp_path / "nothing"
    nothing.mkdir()
    (nothing / "metrics.jsonl").write_text('{"step": 1, "train_runtime": 3}\n')
    assert plot_run(nothing) == [] and not (nothing / "plots").exists()


def test_report_states_the_brier_decomposition(tmp_path: Path) -> None:
    make_run(tmp_path / "r", ["task=oracle"], metrics=metric_steps(2, 0.3) + [
                  {"step": 2, "stage": "train", "calibration/auroc": 0.61, "kl": 0.02, "advantage_std": 0.4},
                  {"step": 2, "stage": "warmup", "calibration/auroc": 0.99}],
              summary={"status": "completed", "wall_time_s": 1.0, "final_metrics": {}},
              eval_metrics={"accuracy": 0.7, "auroc": 0.5, "reliability": 0.01, "resolution": 0.0,
                            "uncertainty": 0.21, "brier_binned": 0.22})
    md = write_report(tmp_path)["md"].read_text()
    assert "eval/auroc" in md and "eval/brier_binned = eval/reliability - eval/resolution + eval/uncertainty" in md
    frame = report_frame(tmp_path)
    assert frame.loc[0, "train/calibration/auroc"] == 0.61 and frame.loc[0, "train/kl"] == 0.02  # not the warm-up's


def test_the_curves_mark_each_evaluation_of_the_extra_held_out_set(tmp_path: Path) -> None:
    """A run scoring a second held-out set (function_call's real BFCL cases) shows it beside the main accuracy."""
    from ao_calib.reporting.plot import Stage, held_out_points

    run = tmp_path / "run"
    run.mkdir()
    (run / "eval_initial.json").write_text(json.dumps({"metrics": {"accuracy": 0.2}}))
    (run / "eval.json").write_text(json.dumps({"metrics": {"accuracy": 0.8},
                                               "extra_test": {"metrics": {"accuracy": 0.31}}}))
    points = held_out_points(run, [Stage("train", 0.0, 20.0)])
    assert points == [(0.0, "held-out accuracy", 0.2), (20.0, "held-out accuracy", 0.8),
                      (20.0, "extra held-out set accuracy", 0.31)]
