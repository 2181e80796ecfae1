"""Sweeps through hydra-submitit-launcher: the SLURM preset composes with its fields, a local two-job sweep runs as
real submitit processes and is reported, and a job SLURM requeued continues in its own directory."""

from __future__ import annotations

import json

from tests.conftest import run_cli

TINY = ["experiment=function_call_tiny", "trainer.max_steps=2", "eval.num_samples=4"]


def test_the_slurm_launcher_composes_with_its_fields_overridable():
    result = run_cli("ao_calib.run", "hydra/launcher=slurm", "hydra.launcher.partition=gpu",
                     "hydra.launcher.nodes=2", "--cfg", "hydra")
    assert result.returncode == 0, result.stderr[-2000:]
    launcher = result.stdout.split("\n  launcher:\n", 1)[1]
    for field in ("submitit_launcher.SlurmLauncher", "nodes: 2", "gpus_per_node: 1", "tasks_per_node: 1",
                  "timeout_min: 240", "partition: gpu", "max_num_timeout: 3"):
        assert field in launcher, field


def test_a_local_submitit_sweep_runs_each_point_as_a_job_and_is_reported(tmp_path):
    sweep = tmp_path / "sweep"
    result = run_cli("ao_calib.run", "-m", "hydra/launcher=submitit_local", *TINY, "trainer.lr=1e-5,3e-5",
                     f"hydra.sweep.dir={sweep}")
    assert result.returncode == 0, result.stderr[-3000:]
    runs = sorted(p for p in sweep.iterdir() if (p / "summary.json").is_file())
    assert len(runs) == 2
    assert all(json.loads((r / "summary.json").read_text())["status"] == "completed" for r in runs)
    jobs = [p for p in (sweep / ".submitit").iterdir() if p.name != "%j"]
    assert len(jobs) == 2  # two submitit jobs, each with its own folder of logs
    (sweep / "report.md").unlink()
    report = run_cli("ao_calib.report", str(sweep))
    assert report.returncode == 0, report.stderr[-2000:]
    text = (sweep / "report.md").read_text()
    assert "2 run(s): 2 completed" in text and "1e-05" in text and "3e-05" in text


def test_a_requeued_slurm_job_resumes_in_its_own_directory(tmp_path):
    out = tmp_path / "run"
    first = run_cli("ao_calib.run", *TINY, "trainer.save_steps=1", f"hydra.run.dir={out}")
    assert first.returncode == 0, first.stderr[-2000:]
    # The same job again, as SLURM restarts it after a preemption: the used directory is not refused.
    again = run_cli("ao_calib.run", *TINY[:1], "trainer.max_steps=3", "trainer.save_steps=1", "eval.num_samples=4",
                    f"hydra.run.dir={out}", env={"SLURM_RESTART_COUNT": "1"})
    assert again.returncode == 0, again.stderr[-2000:]
    steps = [json.loads(line)["step"] for line in (out / "metrics.jsonl").read_text().splitlines()
             if json.loads(line).get("stage") == "train" and "loss" in json.loads(line)]
    assert steps == sorted(set(steps)) and steps[-1] == 3  # steps 1-2 kept, step 3 added, none twice
    assert json.loads((out / "summary.json").read_text())["status"] == "completed"
