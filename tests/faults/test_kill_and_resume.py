"""Runs killed as a cluster or a user kills them, then resumed: real ``python -m ao_calib.run`` processes on the
tiny Qwen3 (forked from the test's command server, tests/helpers/cli_zygote.py), signals sent by ``os.kill`` at points
read from the run's own files."""

from __future__ import annotations

import json
import signal
from pathlib import Path

import pytest

from ao_calib.runs.records import load_run, read_metrics
from tests.helpers.background_run import BackgroundRun
from tests.helpers.commands import run_cli

TIMEOUT_S = 900  # per phase: generous, for a loaded CI machine


def start(run: Path, *overrides: str) -> BackgroundRun:
    return BackgroundRun(run, *overrides, timeout=TIMEOUT_S)


def train_steps(run: Path, key: str = "loss") -> list[int]:
    return [r["step"] for r in read_metrics(run) if r.get("stage") == "train" and key in r]


def has_step(run: Path, step: int, key: str = "loss"):
    return lambda: step in train_steps(run, key)


def samples(run: Path) -> list[int]:
    path = run / "completions.jsonl"
    return [json.loads(line)["step"] for line in path.read_text().splitlines()] if path.exists() else []


def summary(run: Path) -> dict:
    return json.loads((run / "summary.json").read_text())


def ok(result: subprocess.CompletedProcess) -> subprocess.CompletedProcess:
    assert result.returncode == 0, f"{result.stdout[-2000:]}\n{result.stderr[-4000:]}"
    return result


@pytest.mark.slow
def test_grpo_sigterm_then_kill_9_mid_generation_then_resume(tmp_path):
    """SIGTERM saves a checkpoint and ends the run "interrupted"; kill -9 while step k+1 generates leaves it
    "running", which the report calls "crashed"; each resume starts from the newest whole checkpoint, and the
    run ends with every step and every sample logged exactly once, one wandb run, one initial evaluation."""
    run = tmp_path / "grpo"
    overrides = ["experiment=function_call_tiny", "trainer.max_steps=4", "trainer.save_steps=3", "eval.num_samples=2",
                 "alerts.patience=1", "logger=wandb", f"hydra.run.dir={run}"]
    resume = [*overrides, "trainer.resume_from_checkpoint=latest"]

    proc = start(run, *overrides)
    proc.wait_for(has_step(run, 1), "step 1", TIMEOUT_S)
    wandb_id = summary(run)["wandb_run_id"]
    proc.send(signal.SIGTERM)
    stopped = proc.result(TIMEOUT_S)
    assert stopped.returncode == 128 + signal.SIGTERM and "Traceback" not in stopped.stderr
    first = summary(run)
    assert first["status"] == "interrupted" and first["signal"] == "SIGTERM"
    stopped_at = int(first["error"].rsplit(" ", 1)[1])  # "interrupted by SIGTERM: checkpoint saved at step N"
    assert (run / "checkpoints" / f"checkpoint-{stopped_at}" / "trainer_state.json").exists()
    assert load_run(run).status == "interrupted"
    initial_eval = (run / "eval_initial.json").stat().st_mtime_ns

    refused = run_cli("ao_calib.run", *overrides, timeout=TIMEOUT_S)  # a fresh start into this directory
    assert refused.returncode == 2 and "trainer.resume_from_checkpoint=latest" in refused.stderr

    proc = start(run, *resume)
    proc.wait_for(has_step(run, stopped_at + 1), f"step {stopped_at + 1}", TIMEOUT_S)
    proc.send(signal.SIGKILL)  # kill -9 while the next step generates
    assert proc.result(TIMEOUT_S).returncode == -signal.SIGKILL
    assert summary(run)["status"] == "running" and load_run(run).status == "crashed"

    ok(run_cli("ao_calib.run", *resume, timeout=TIMEOUT_S))
    final = summary(run)
    assert final["status"] == "completed" and final["wandb_run_id"] == wandb_id
    # The newest whole checkpoint when killed: the SIGTERM one, or the scheduled step-3 one if it was complete.
    assert Path(final["resumed_from"]).name in {f"checkpoint-{stopped_at}", "checkpoint-3"}
    assert train_steps(run) == [1, 2, 3, 4]
    assert sorted(samples(run)) == [s for s in range(4) for _ in range(4)]  # 4 samples a step, each step once
    assert (run / "eval_initial.json").stat().st_mtime_ns == initial_eval  # not evaluated again
    # Every reward is 0 on the untrained tiny model: no learning signal, and the run says so.
    assert final["alerts"]["no_learning_signal"]["step"] == 1  # fired in the first process, kept across resumes
    assert any(r.get("alert/no_learning_signal") for r in read_metrics(run))

    again = ok(run_cli("ao_calib.run", *resume, timeout=TIMEOUT_S))
    assert "already completed step 4" in again.stdout


@pytest.mark.slow
def test_sft_killed_mid_training_and_mid_evaluation_ends_as_an_uninterrupted_run(tmp_path):
    """Same seed, same numbers: kill -9 after the first checkpoint and again during the final evaluation, resume
    twice; the per-step training loss and the held-out metrics equal an uninterrupted run's."""
    common = ["experiment=tool_json_tiny", "trainer.max_steps=6", "trainer.save_steps=2", "eval.every_steps=null",
              "eval.initial=false", "eval.num_samples=4"]
    straight, killed = tmp_path / "straight", tmp_path / "killed"
    ok(run_cli("ao_calib.run", *common, f"hydra.run.dir={straight}", timeout=TIMEOUT_S))
    resume = [*common, f"hydra.run.dir={killed}", "trainer.resume_from_checkpoint=latest"]

    proc = start(killed, *common, f"hydra.run.dir={killed}")
    proc.wait_for(lambda: (killed / "checkpoints" / "checkpoint-2" / "trainer_state.json").exists(), "checkpoint-2",
                  TIMEOUT_S)
    proc.send(signal.SIGKILL)
    assert proc.result(TIMEOUT_S).returncode == -signal.SIGKILL
    proc = start(killed, *resume)
    proc.wait_for(lambda: (killed / "adapter" / "adapter_model.safetensors").exists(), "the final evaluation",
                  TIMEOUT_S)
    proc.send(signal.SIGKILL)  # during the final evaluation
    assert proc.result(TIMEOUT_S).returncode == -signal.SIGKILL
    assert not (killed / "eval.json").exists()
    ok(run_cli("ao_calib.run", *resume, timeout=TIMEOUT_S))

    def losses(run: Path) -> dict[int, float]:
        return {r["step"]: r["loss"] for r in read_metrics(run) if r.get("stage") == "train" and "loss" in r}

    assert train_steps(killed) == [1, 2, 3, 4, 5, 6]
    assert losses(killed) == pytest.approx(losses(straight), rel=1e-4)
    held_out = [json.loads((run / "eval.json").read_text())["metrics"] for run in (straight, killed)]
    assert held_out[1] == pytest.approx(held_out[0], abs=1e-6)
    assert summary(killed)["status"] == "completed"
