"""Faults caught without a training run: bad values refused at start-up, damaged and incomplete checkpoints, a
full disk mid-save (a real transformers Trainer on a two-weight model), logs cut back on resume, a crashed run
told from a live one, the judge down (real litellm against a closed port and the loopback judge server), data
files with bad bytes or missing, and over-long prompts."""

from __future__ import annotations

import asyncio
import dataclasses
import errno
import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch
from safetensors.torch import save_file

from ao_calib.config.compose import check_values
from ao_calib.config.compose import compose_run_config
from ao_calib.core.errors import AOCalibError, MissingDataFileError
from ao_calib.runs.checkpoints import checkpoint_problem, resolve_checkpoint, start_point
from ao_calib.runs.records import load_run
from ao_calib.runs.run_dir import RunDir
from tests.helpers.background_run import BackgroundRun
from tests.helpers.commands import run_cli
from tests.helpers.paths import PROJECT_ROOT

# --------------------------------------------------------------------------------------------- bad values

BAD_VALUES = [  # (overrides, key the message must name, allowed range it must state)
    (["experiment=function_call_tiny", "trainer.max_steps=-5"], "trainer.max_steps=-5", ">= 1"),
    (["experiment=function_call_tiny", "trainer.lr=-1"], "trainer.lr=-1", "> 0"),
    (["experiment=function_call_tiny", "trainer.num_generations=1"], "trainer.num_generations=1", ">= 2"),
    (["experiment=function_call_tiny", "trainer=rloo", "trainer.num_generations=1"], "trainer.num_generations=1",
     ">= 2"),
    (["experiment=function_call_tiny", "trainer.temperature=0"], "trainer.temperature=0", "> 0"),
    (["experiment=function_call_tiny", "trainer.beta=-0.1"], "trainer.beta=-0.1", ">= 0"),
    (["experiment=function_call_tiny", "eval.num_samples=0"], "eval.num_samples=0", ">= 1 or null"),
    (["experiment=function_call_tiny", "eval.batch_size=0"], "eval.batch_size=0", ">= 1"),
    (["experiment=function_call_tiny", "trainer.batch_size=0"], "trainer.batch_size=0", ">= 1"),
    (["experiment=tool_json_tiny", "trainer.max_steps=0"], "trainer.max_steps=0", ">= 1"),
    (["experiment=quickstart", "warmup.max_steps=0"], "warmup.max_steps=0", ">= 1"),
    (["experiment=quickstart", "task.layer_percents=[150]"], "task.layer_percents=[150]", "(0, 100)"),
    (["experiment=quickstart", "task.activations.k=0"], "task.activations.k=0", ">= 1"),
    (["experiment=quickstart", "task.calibration.lam=-1"], "lam=-1", ">= 0"),
]


def checked(overrides: list[str]) -> None:
    """What the run does at start-up, before any model loads."""
    check_values(compose_run_config(overrides))


@pytest.mark.parametrize("overrides,key,allowed", BAD_VALUES, ids=[b[1] for b in BAD_VALUES])
def test_bad_value_is_refused_naming_key_and_range(overrides, key, allowed):
    with pytest.raises(AOCalibError) as info:
        checked(overrides)
    assert key in str(info.value) and allowed in str(info.value)


@pytest.mark.parametrize("experiment", ["function_call_tiny", "tool_json_tiny", "quickstart", "oracle_tiny"])
def test_shipped_presets_pass_the_checks(experiment):
    checked([f"experiment={experiment}"])


def test_cli_refuses_a_bad_value_with_exit_2_before_any_model_loads(tmp_path):
    result = run_cli("ao_calib.run", "experiment=function_call_tiny", "trainer.max_steps=-5",
                     f"hydra.run.dir={tmp_path / 'r'}", timeout=600)
    assert result.returncode == 2
    assert result.stderr.strip().splitlines()[-1] == "error: trainer.max_steps=-5: out of range, allowed >= 1"
    assert not (tmp_path / "r").exists()  # refused before Hydra makes the run directory
    assert "Loading weights" not in result.stdout + result.stderr and "Traceback" not in result.stderr

# ----------------------------------------------------------------------------------------------- checkpoints


def write_checkpoint(path: Path, step: int) -> Path:
    path.mkdir(parents=True)
    save_file({"w": torch.ones(64)}, str(path / "adapter_model.safetensors"))
    torch.save({"state": {}}, path / "optimizer.pt")
    (path / "trainer_state.json").write_text(json.dumps({"global_step": step}))
    return path


@pytest.fixture
def run_with_checkpoints(tmp_path) -> RunDir:
    run = RunDir(tmp_path / "run")
    for step in (2, 4, 6):
        write_checkpoint(run.checkpoints() / f"checkpoint-{step}", step)
    return run


def test_latest_skips_an_incomplete_and_a_truncated_checkpoint_with_a_warning(run_with_checkpoints, capsys):
    run = run_with_checkpoints
    (run.checkpoints() / "checkpoint-6" / "trainer_state.json").unlink()  # as after a full disk
    weights = run.checkpoints() / "checkpoint-4" / "adapter_model.safetensors"
    weights.write_bytes(weights.read_bytes()[:100])  # truncated
    assert resolve_checkpoint("latest", run) == str(run.checkpoints() / "checkpoint-2")
    out = capsys.readouterr().out
    assert "checkpoint-6 is damaged (no trainer_state.json" in out
    assert "checkpoint-4 is damaged (adapter_model.safetensors is damaged" in out


def test_a_damaged_checkpoint_named_explicitly_is_one_clear_message(run_with_checkpoints):
    path = run_with_checkpoints.checkpoints() / "checkpoint-6"
    (path / "optimizer.pt").write_bytes((path / "optimizer.pt").read_bytes()[:50])
    with pytest.raises(AOCalibError, match=r"checkpoint-6: optimizer.pt is damaged \(truncated\); name another "
                                           r"checkpoint or use trainer.resume_from_checkpoint=latest"):
        resolve_checkpoint(str(path), run_with_checkpoints)
    assert checkpoint_problem(run_with_checkpoints.checkpoints() / "checkpoint-4") is None


def test_a_half_written_staging_folder_is_never_a_checkpoint(run_with_checkpoints):
    write_checkpoint(run_with_checkpoints.checkpoints() / ".partial" / "checkpoint-8", 8)  # killed mid-save
    assert resolve_checkpoint("latest", run_with_checkpoints).endswith("checkpoint-6")


class TwoWeights(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.w = torch.nn.Linear(2, 1)

    def forward(self, x, y):
        return {"loss": torch.nn.functional.mse_loss(self.w(x).squeeze(-1), y)}


def test_a_full_disk_mid_save_leaves_no_checkpoint_that_looks_whole(tmp_path):
    from transformers import Trainer, TrainingArguments

    from ao_calib.trainers.common import AtomicCheckpointMixin

    class DiskFillsAtStep4(AtomicCheckpointMixin, Trainer):
        def _save_rng_state(self, output_dir):  # written after the weights and the optimizer: mid-save
            if self.state.global_step == 4:
                raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
            super()._save_rng_state(output_dir)

    rows = [{"x": torch.randn(2), "y": torch.randn(())} for _ in range(16)]
    args = TrainingArguments(output_dir=str(tmp_path / "checkpoints"), max_steps=6, save_steps=2,
                             per_device_train_batch_size=2, use_cpu=True, report_to="none",
                             logging_steps=100, save_total_limit=3)
    trainer = DiskFillsAtStep4(model=TwoWeights(), args=args, train_dataset=rows)
    with pytest.raises(OSError) as info:
        trainer.train()
    assert info.value.errno == errno.ENOSPC
    run = RunDir(tmp_path)
    assert [p.name for p in run.checkpoint_dirs()] == ["checkpoint-2"]
    assert resolve_checkpoint("latest", run).endswith("checkpoint-2")

# ---------------------------------------------------------------------------------------- run directory


def test_a_fresh_run_into_a_used_directory_is_refused_naming_both_choices(tmp_path):
    run = RunDir(tmp_path)
    (tmp_path / ".hydra").mkdir()
    (tmp_path / "run.log").write_text("")
    assert start_point(None, run, 10).resuming is False  # only Hydra's own files: still fresh
    (tmp_path / "metrics.jsonl").write_text("{}\n")
    with pytest.raises(AOCalibError) as info:
        start_point(None, run, 10)
    assert "trainer.resume_from_checkpoint=latest" in str(info.value) and "new directory" in str(info.value)


def test_resuming_a_run_that_completed_its_steps_has_nothing_to_do(run_with_checkpoints):
    run_with_checkpoints.summary.write_text(json.dumps({"status": "completed", "final_metrics": {"step": 6}}))
    assert start_point("latest", run_with_checkpoints, 6).finished is not None
    longer = start_point("latest", run_with_checkpoints, 10)  # more steps asked: it trains on
    assert longer.finished is None and longer.step == 6


def test_resume_cuts_the_logs_back_to_the_checkpoint_step(tmp_path):
    run = RunDir(tmp_path)
    metrics = [{"step": 10, "stage": "warmup", "loss": 1.0}, *({"step": s, "stage": "train"} for s in (1, 2, 3, 4)),
               {"step": 4, "stage": "train", "train_runtime": 9.0}]
    run.metrics.write_text("".join(json.dumps(r) + "\n" for r in metrics) + '{"step": 5, "sta')  # torn last line
    run.completions.write_text("".join(json.dumps({"step": s}) + "\n" for s in (0, 1, 2, 3)))
    run.alerts.write_text("".join(json.dumps({"step": s, "name": n, "message": "m"}) + "\n"
                                  for s, n in ((1, "no_learning_signal"), (3, "kl_explosion"))))
    assert run.cut_logs(2) == {"metrics.jsonl": 4, "completions.jsonl": 2, "alerts.jsonl": 1}
    assert run.fired_alerts() == {"no_learning_signal": {"step": 1, "message": "m"}}
    assert [(r["stage"], r["step"]) for r in map(json.loads, run.metrics.read_text().splitlines())] == [
        ("warmup", 10), ("train", 1), ("train", 2)]
    assert [json.loads(line)["step"] for line in run.completions.read_text().splitlines()] == [0, 1]


def _summary_of(tmp_path: Path, pid: int) -> Path:
    run = tmp_path / f"run{pid}"
    run.mkdir()
    (run / "summary.json").write_text(json.dumps({"status": "running", "pid": pid, "host": socket.gethostname()}))
    return run


def test_report_tells_a_crashed_run_from_a_live_one(tmp_path):
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    assert load_run(_summary_of(tmp_path, int(dead.stdout))).status == "crashed"
    live = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)", "ao_calib.run"])
    try:
        assert load_run(_summary_of(tmp_path, live.pid)).status == "running"
    finally:
        live.kill()
        live.wait()
    report = run_cli("ao_calib.report", str(tmp_path), "--out", str(tmp_path / "report"))
    assert report.returncode == 0, report.stderr
    assert "crashed" in report.stdout and "process is gone" in report.stdout

# ------------------------------------------------------------------------------------------------- judge


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_a_refused_connection_is_named_as_such_not_http_500(monkeypatch):
    from ao_calib.judges.base import JudgeItem, last_failure
    from ao_calib.judges.config import LiteLLMJudgeConfig
    from ao_calib.judges.litellm_judge import LiteLLMJudge

    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    # Set here, so the variable the first litellm import sets goes again after the test: the environment the
    # test's command server was started in stays this process's, and the next command-line run need not restart it.
    monkeypatch.setenv("LITELLM_LOCAL_MODEL_COST_MAP", os.environ.get("LITELLM_LOCAL_MODEL_COST_MAP", "True"))
    api_base = f"http://127.0.0.1:{_closed_port()}/v1"
    judge = LiteLLMJudge(LiteLLMJudgeConfig(model="openai/judge-test", prompt="{prompt} {question} {answer}",
                                            api_base=api_base, max_retries=1, backoff_s=0.01, timeout_s=5,
                                            cache_dir=None))
    scores = asyncio.run(judge.score([JudgeItem("p", "q", "yes"), JudgeItem("p", "q", "no")]))
    assert scores == [None, None]
    who, error = last_failure()
    assert api_base in who and error.startswith("connection failed") and "500" not in error
    assert judge.pop_step_stats()["judge/masked"] == 2


def test_judge_outage_alerts_at_once_then_stops_the_run_naming_the_judge():
    from transformers import TrainerControl, TrainerState

    from ao_calib.judges.base import note_failure
    from ao_calib.monitoring.callback import JudgeOutageCallback

    note_failure("openai/judge at http://127.0.0.1:9/v1", "connection failed (APIConnectionError)")
    callback, state, control = JudgeOutageCallback(stop_after=3), TrainerState(), TrainerControl()
    for step, masked in enumerate([2, 8, 8, 8], start=1):
        state.global_step = step
        logs = {"judge/items": 8.0, "judge/masked": float(masked)}
        callback.on_log(None, state, control, logs=logs)
        assert ("alert/judge_outage" in logs) == (masked == 8)
        assert control.should_training_stop == (step >= 4)
    assert callback.fired["judge_outage"]["step"] == 2
    assert "http://127.0.0.1:9/v1" in callback.stop_reason and "connection failed" in callback.stop_reason
    assert "3 steps in a row" in callback.stop_reason

# -------------------------------------------------------------------------------------------- data files


def test_non_utf8_bytes_name_the_file_and_line(tmp_path):
    from ao_calib_tasks.oracle.rows.files import load_labelled_rows, load_wildchat

    good = json.dumps({"prompt": "p", "question": "q", "answer": "Yes"})
    path = tmp_path / "rows.jsonl"
    path.write_bytes((good + "\n" + good + "\n").encode() + b'{"prompt": "caf\xe9"}\n')
    with pytest.raises(AOCalibError, match=rf"{path}: line 3: not valid UTF-8 \(byte 0xe9"):
        load_labelled_rows(path)
    with pytest.raises(AOCalibError, match=r"line 3: not valid UTF-8"):
        load_wildchat(path)


def test_a_bad_row_names_file_line_and_field(tmp_path):
    from ao_calib_tasks.oracle.rows.files import load_labelled_rows

    path = tmp_path / "rows.jsonl"
    path.write_text("\n" + json.dumps({"prompt": "p", "question": "q", "answer": "maybe"}) + "\n")
    with pytest.raises(AOCalibError, match=rf"{path}: row 0, field 'answer': \(line 2\) must be Yes or No"):
        load_labelled_rows(path)


def test_a_missing_data_file_is_one_line_and_exit_2(tmp_path):
    from ao_calib_tasks.oracle.rows.files import load_labelled_rows
    from ao_calib_tasks.tool_json.data import load_rows

    for load in (load_labelled_rows, load_rows):
        with pytest.raises(MissingDataFileError, match="not found"):
            load(tmp_path / "nope.jsonl")
    result = run_cli("ao_calib.run", "experiment=oracle_tiny", f"task.data.train_path={tmp_path / 'nope.jsonl'}",
                     f"task.data.test_path={tmp_path / 'nope.jsonl'}", f"hydra.run.dir={tmp_path / 'r'}",
                     timeout=600)
    assert result.returncode == 2, result.stderr[-2000:]
    last = result.stderr.strip().splitlines()[-1]
    assert last.startswith("error: ") and "not found" in last and "nope.jsonl" in last, last
    assert "Traceback" not in result.stderr

# ------------------------------------------------------------------------------------------------ prompts


def test_over_long_prompts_are_dropped_or_truncated_and_counted(tiny_tokenizer):
    import datasets

    from ao_calib.preflight.prompts import guard_prompts
    from ao_calib.task_api import TaskData

    short = [{"role": "user", "content": "what is the weather in Paris"}]
    huge = [{"role": "user", "content": "lorem ipsum " * 3000}]
    data = TaskData(train=datasets.Dataset.from_list([{"prompt": short}, {"prompt": huge}, {"prompt": short}]),
                    test=datasets.Dataset.from_list([{"prompt": short}]))
    kwargs = {"enable_thinking": False}
    dropped, counts = guard_prompts(data, tiny_tokenizer, 256, "drop", kwargs)
    assert len(dropped.train) == 2 and counts == {"train_dropped": 1}
    cut, counts = guard_prompts(data, tiny_tokenizer, 256, "truncate", kwargs)
    assert len(cut.train) == 3 and counts == {"train_truncated": 1}
    lengths = [len(tiny_tokenizer.apply_chat_template(p, tokenize=True, add_generation_prompt=True, **kwargs)
                   ["input_ids"]) for p in cut.train["prompt"]]
    assert max(lengths) <= 256
    with pytest.raises(AOCalibError, match="activation placeholders"):
        guard_prompts(dataclasses.replace(data, steering=object()), tiny_tokenizer, 256, "truncate", kwargs)


def test_references_longer_than_the_generation_budget_are_counted_and_named(tiny_tokenizer):
    import datasets

    from ao_calib.preflight.references import completion_lengths, references_over_budget
    from ao_calib.task_api import TaskData

    prompt = [{"role": "user", "content": "add them"}]
    short, long = '{"final": "5"}', '{"tool": "python", "args": {"code": "' + "x = x + 1; " * 20 + '"}}'
    n_short, n_long = completion_lengths(tiny_tokenizer, [short, long])
    assert n_short < 16 < n_long
    rows = [{"prompt": prompt, "completion": c} for c in (short, long, long)]
    data = TaskData(train=datasets.Dataset.from_list(rows), test=datasets.Dataset.from_list(rows[:2]))
    alerts = references_over_budget(data, tiny_tokenizer, {"test": ("eval.max_new_tokens", 16),
                                                           "train": ("trainer.max_completion_length", n_long)})
    # a reference exactly at the budget is whole (the end-of-turn token is not needed to score it)
    assert list(alerts) == ["references_over_eval_budget"]
    alert = alerts["references_over_eval_budget"]
    assert (alert["over"], alert["rows"], alert["longest"]) == (1, 2, n_long)
    assert "eval.max_new_tokens=16" in alert["message"] and f"at least {n_long}" in alert["message"]
    tight = references_over_budget(data, tiny_tokenizer, {"train": ("trainer.max_completion_length", n_long - 1)})
    assert tight["references_over_rollout_budget"]["over"] == 2
    # no budget (an SFT stage samples nothing), or rows without a reference completion: nothing to check
    assert references_over_budget(data, tiny_tokenizer, {"train": ("trainer.max_completion_length", None)}) == {}
    bare = TaskData(train=data.train, test=datasets.Dataset.from_list([{"prompt": prompt, "answer": long}]))
    assert references_over_budget(bare, tiny_tokenizer, {"test": ("eval.max_new_tokens", 1)}) == {}


@pytest.mark.slow
@pytest.mark.parametrize("experiment", ["tool_json_smollm2", "tool_json_smollm2_multiturn", "function_call_smollm2"])
def test_the_real_model_presets_budget_every_reference(experiment, smollm2_source):
    """The SmolLM2 presets generate enough tokens for every reference answer of their generated data (three
    seeds), in evaluation and in rollouts: no row is cut off whatever the model writes."""
    from ao_calib.config.checks import eval_max_new_tokens
    from ao_calib.models import loading as models
    from ao_calib.preflight.references import completion_lengths, references_over_budget
    from ao_calib.run import _generation_budgets
    from ao_calib.task_api import build_task

    configs = [compose_run_config([f"experiment={experiment}", f"trainer.seed={seed}"]) for seed in (0, 1, 2)]
    tokenizer = models.load_tokenizer(smollm2_source, configs[0].model)  # the seed changes the data, not the model
    for cfg in configs:
        task = build_task(cfg)
        data = task.build_data(tokenizer, None)
        assert references_over_budget(data, tokenizer, _generation_budgets(cfg)) == {}
    if experiment == "function_call_smollm2":  # and the real BFCL fixture every evaluation also scores
        real = completion_lengths(tokenizer, [row["completion"] for row in task.extra_rows()])
        assert len(real) == 150 and max(real) <= eval_max_new_tokens(cfg)


# ------------------------------------------------------------------------------------------------ signals


def _ctrl_c_target(run: Path) -> subprocess.Popen:
    """A run of its own for ctrl-c: a shell starts a background job with SIGINT ignored, and the run would inherit
    that (Python then installs no KeyboardInterrupt handler): the suite started with `&` saw ctrl-c ignored. The
    run gets the default, as a terminal gives it."""
    return subprocess.Popen([sys.executable, "-m", "ao_calib.run", "experiment=function_call_tiny",
                             f"hydra.run.dir={run}"], cwd=PROJECT_ROOT, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))


def _signalled_before_training(run: Path, sig: signal.Signals) -> tuple[int, str]:
    """(exit status, stderr) of a run sent ``sig`` once it has written summary.json ("running" is written before the
    model loads). SIGTERM goes to a run forked from the test's command server, whose handler the run installs
    itself; SIGINT to a process started with the default handler."""
    if sig == signal.SIGTERM:
        proc = BackgroundRun(run, "experiment=function_call_tiny", f"hydra.run.dir={run}", timeout=600)
        proc.wait_for(lambda: (run / "summary.json").exists(), "summary.json", 600)  # generous: a loaded machine
        proc.send(sig)
        done = proc.result(600)
        return done.returncode, done.stderr
    proc = _ctrl_c_target(run)
    deadline = time.time() + 600  # generous: a loaded CI machine starts Python slowly
    while not (run / "summary.json").exists() and proc.poll() is None and time.time() < deadline:
        time.sleep(0.05)
    assert (run / "summary.json").exists(), "the run never wrote summary.json"
    proc.send_signal(sig)
    _, err = proc.communicate(timeout=600)
    return proc.returncode, err


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=["ctrl-c", "sigterm"])
def test_a_signal_before_training_ends_the_run_interrupted_naming_it(tmp_path, sig):
    run = tmp_path / "r"
    returncode, err = _signalled_before_training(run, sig)
    summary = json.loads((run / "summary.json").read_text())
    # the whole summary and the end of stderr in the message: a miss here is a race worth reading
    assert (summary["status"], summary.get("signal")) == ("interrupted", sig.name), (summary, err[-3000:])
    assert summary["error"] == f"interrupted by {sig.name}"
    assert returncode == 128 + sig and "Traceback" not in err
    assert "trainer.resume_from_checkpoint=latest" in err

# ---------------------------------------------------------------------------------------- learning signal


def test_no_learning_signal_fires_for_group_trainers_and_for_ppo():
    """GRPO and RLOO log the group advantage spread; PPO's whitened advantages keep a spread of 1 whatever the
    rewards, so the alert also reads the spread of its rollouts' scores."""
    from omegaconf import OmegaConf
    from transformers import TrainerControl, TrainerState

    from ao_calib.monitoring.callback import AlertCallback, training_alerts
    from ao_calib.monitoring.config import AlertsConfig

    for sick in ({"advantage_std": 0.0}, {"advantage_std": 1.0, "reward_spread": 0.0}):
        callback = AlertCallback(training_alerts(OmegaConf.structured(AlertsConfig)), patience=3)
        for step in (1, 2, 3):
            state = TrainerState(global_step=step)
            callback.on_log(None, state, TrainerControl(), logs=dict(sick))
        assert callback.fired["no_learning_signal"]["step"] == 3
    healthy = AlertCallback(training_alerts(OmegaConf.structured(AlertsConfig)), patience=1)
    healthy.on_log(None, TrainerState(global_step=1), TrainerControl(), logs={"advantage_std": 1.0,
                                                                              "reward_spread": 0.3})
    assert not healthy.fired
