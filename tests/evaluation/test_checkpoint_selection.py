"""Checkpoint selection on the validation split (``eval.select_metric``): the chosen step's adapter is the stage's
final one and the test split is scored once, on it; ties, NaN, refusals at start-up and resumes.

The end-to-end runs train the tiny Qwen3 (SFT, real TRL) on a task from a package outside the repository whose
evaluation reports a figure set per evaluation tag (``task.values``), so that the best step is known, and the LoRA
weights of the model each evaluation ran on (their sum of absolute values), so that the test can tell which adapter
the final evaluation scored."""

from __future__ import annotations

import json
import math
import os
import shutil
import textwrap
from pathlib import Path

import pytest

from ao_calib.evaluation.selection import StageSelection, lower_is_better
from ao_calib.runs.run_dir import RunDir
from tests.helpers.commands import assert_ok, run_cli
from tests.helpers.files import read_jsonl

FILES = {
    "sel_pkg/__init__.py": "",
    "sel_pkg/conf/__init__.py": "",
    "sel_pkg/task.py": '''
        from dataclasses import dataclass, field
        from typing import Optional

        import datasets

        from ao_calib.config import TaskConfig
        from ao_calib.task_api import Task, TaskData


        @dataclass
        class ScriptedData:
            eval_split: str = "test"
            test_path: Optional[str] = None


        @dataclass
        class ScriptedConfig(TaskConfig):
            data: ScriptedData = field(default_factory=ScriptedData)
            values: dict[str, float] = field(default_factory=dict)  # the figure "scripted" of each evaluation tag


        class ScriptedTask(Task):
            """Says "ok"; its evaluation reports the figure the config sets for the evaluation's tag."""

            config_class = ScriptedConfig
            headline_metric = "says_ok"

            def build_data(self, tokenizer, model):
                def rows(split, n):
                    return datasets.Dataset.from_list([
                        {"prompt": [{"role": "user", "content": f"{split} {i}: say ok."}], "completion": "ok",
                         "split": split} for i in range(n)])

                return TaskData(train=rows("train", 16), test=rows(self.config.data.eval_split, 3))

            def reward_functions(self, data):
                return {"says_ok": lambda completions, **_: [0.0 for _ in completions]}

            def score(self, completions, rows, data):
                return [{"says_ok": float("ok" in c)} for c in completions]

            def aggregate(self, records, run_dir, tag):
                return {**super().aggregate(records, run_dir, tag), "scripted": self.config.values.get(tag, 0.0)}

            def metric_names(self):
                return super().metric_names() | {"scripted"}

            def extra_evaluations(self, model, tokenizer, generate, run_dir, tag, data):
                lora = sum(p.detach().abs().sum().item() for n, p in model.named_parameters() if "lora_" in n)
                return {"lora_abs_sum": lora}
    ''',
    "sel_pkg/conf/task/scripted.yaml": '''
        _target_: sel_pkg.task.ScriptedTask
        name: scripted
        data: {eval_split: test, test_path: null}
        values: {step1: .nan, step2: 0.9, step3: 0.2, step4: 0.9, step5: 0.5}
    ''',
    "sel_pkg/conf/reward/scripted.yaml": '''
        defaults:
          - reward_schema
        name: scripted
        weights:
          says_ok: 1.0
    ''',
}

SELECTING = ("task.data.eval_split=validation", "eval.select_metric=scripted")


@pytest.fixture(scope="module")
def package(tmp_path_factory) -> Path:
    """The task's package, on PYTHONPATH for this module's tests: set in this process's environment rather than
    passed to each run, so that the runs fork from one command server (tests/helpers/cli_zygote.py) started with it
    instead of each importing torch and the trainers anew in a plain subprocess."""
    root = tmp_path_factory.mktemp("outside_repo")
    for name, text in FILES.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text).lstrip())
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("PYTHONPATH", os.pathsep.join(filter(None, (str(root), os.environ.get("PYTHONPATH")))))
        yield root


RUN = ("hydra.searchpath=[pkg://sel_pkg.conf]", "task=scripted", "reward=scripted", "model=tiny_qwen3", "trainer=sft",
       "trainer.lr=3e-3", "trainer.max_steps=5", "trainer.batch_size=4", "trainer.max_length=64",
       "trainer.save_steps=1", "trainer.save_total_limit=null", "trainer.logging_steps=1", "eval.initial=false",
       "eval.every_steps=1", "eval.during_num_samples=3", "eval.max_new_tokens=4")


def run(package: Path, out: Path, *overrides: str):
    """A run of the scripted task (``package`` is on PYTHONPATH while the fixture lasts)."""
    return run_cli("ao_calib.run", *RUN, *overrides, f"hydra.run.dir={out}")


@pytest.fixture(scope="module")
def selecting_run(package, tmp_path_factory):
    """One selecting run of five steps, shared: the tests that change its directory work on a copy."""
    out = tmp_path_factory.mktemp("selecting") / "r"
    result = run(package, out, *SELECTING)
    assert_ok(result)
    return out, result.stdout


def lora_abs_sum(adapter_dir: Path) -> float:
    from safetensors.torch import load_file

    return sum(t.abs().sum().item() for t in load_file(str(adapter_dir / "adapter_model.safetensors")).values())


def held_out_splits(out: Path, tag: str) -> set[str]:
    name = "eval_predictions.jsonl" if tag == "final" else f"eval_predictions_{tag}.jsonl"
    return {row["prompt"].split()[0] for row in read_jsonl(out / name)}


def test_the_best_validation_step_becomes_the_adapter_and_the_test_split_scores_it(selecting_run):
    out, stdout = selecting_run
    record = json.loads((out / "selection.json").read_text())
    # step 1's NaN never wins; steps 2 and 4 tie at 0.9: the earlier is chosen
    assert record["selected"]["step"] == 2 and record["selected"]["value"] == 0.9 and record["mode"] == "max"
    assert [(c["step"], c["value"]) for c in record["candidates"]] == [
        (1, None), (2, 0.9), (3, 0.2), (4, 0.9), (5, 0.5)]
    checkpoints = {step: lora_abs_sum(out / "checkpoints" / f"checkpoint-{step}") for step in (2, 5)}
    assert abs(checkpoints[2] - checkpoints[5]) > 1e-3  # training moved the adapter after step 2
    assert lora_abs_sum(out / "adapter") == pytest.approx(checkpoints[2], rel=1e-6)
    final = json.loads((out / "eval.json").read_text())
    assert final["lora_abs_sum"] == pytest.approx(checkpoints[2], rel=1e-5)  # scored on the chosen adapter
    assert held_out_splits(out, "final") == {"test"}
    assert all(held_out_splits(out, f"step{step}") == {"validation"} for step in range(1, 6))
    assert sorted(p.name for p in (out / "selection").iterdir()) == ["step-2"]
    summary = json.loads((out / "summary.json").read_text())
    assert summary["selection"]["train"]["selected"]["step"] == 2
    assert "selected (train): step 2, scripted (max) = 0.9 on validation" in stdout
    validation_rows = [r["step"] for r in read_jsonl(out / "metrics.jsonl") if "val/scripted" in r]
    assert validation_rows == [1, 2, 3, 4, 5]  # the stage's end is a candidate too, logged once


def test_without_select_metric_the_last_step_is_the_adapter(package, tmp_path):
    out = tmp_path / "r"
    assert_ok(run(package, out, "trainer.max_steps=3"))  # step 2 scores best, step 3 is the last
    assert not (out / "selection.json").exists() and not (out / "selection").exists()
    last = lora_abs_sum(out / "checkpoints" / "checkpoint-3")
    assert abs(last - lora_abs_sum(out / "checkpoints" / "checkpoint-2")) > 1e-3
    assert lora_abs_sum(out / "adapter") == pytest.approx(last, rel=1e-6)
    assert json.loads((out / "eval.json").read_text())["lora_abs_sum"] == pytest.approx(last, rel=1e-5)
    assert [r["step"] for r in read_jsonl(out / "metrics.jsonl") if "val/scripted" in r] == [1, 2]


@pytest.mark.parametrize("overrides, named", [
    (("task.data.eval_split=validation", "eval.select_metric=nope"), "eval.select_metric=nope"),
    (("eval.select_metric=scripted",), "task.data.eval_split=test"),
    (("task.data.eval_split=validation", "eval.select_metric=scripted", "eval.every_steps=null"),
     "eval.every_steps"),
    (("task.data.eval_split=validation", "eval.select_metric=scripted", "task.data.test_path=/x.json"),
     "task.data.test_path"),
])
def test_a_selection_that_cannot_run_on_validation_is_refused_before_the_model_loads(package, tmp_path, overrides,
                                                                                       named):
    out = tmp_path / "r"
    result = run(package, out, *overrides)
    assert result.returncode == 2, result.stderr[-3000:]
    assert named in result.stderr
    if "nope" in named:  # the names the task reports are listed
        assert "scripted" in result.stderr and "says_ok" in result.stderr
    assert not (out / "metrics.jsonl").exists() and not (out / "checkpoints").exists()


def test_a_run_trained_further_keeps_its_selection(package, tmp_path):
    """Trained to step 3 (step 2 chosen), then further to step 5 from checkpoint-3, where step 4 is better: the
    candidates before the resume are kept, none is evaluated or logged twice, and step 4 is chosen."""
    out = tmp_path / "r"
    assert_ok(run(package, out, *SELECTING, "trainer.max_steps=3"))
    assert json.loads((out / "selection.json").read_text())["selected"]["step"] == 2
    written = (out / "eval_step2.json").stat().st_mtime_ns
    result = run(package, out, *SELECTING, "task.values.step4=1.0", "trainer.resume_from_checkpoint=latest")
    assert_ok(result)
    record = json.loads((out / "selection.json").read_text())
    assert [c["step"] for c in record["candidates"]] == [1, 2, 3, 4, 5]
    assert record["selected"]["step"] == 4 and record["selected"]["value"] == 1.0
    assert (out / "eval_step2.json").stat().st_mtime_ns == written  # not evaluated again
    assert [r["step"] for r in read_jsonl(out / "metrics.jsonl") if "val/scripted" in r] == [1, 2, 3, 4, 5]
    assert lora_abs_sum(out / "adapter") == pytest.approx(lora_abs_sum(out / "checkpoints" / "checkpoint-4"),
                                                          rel=1e-6)
    assert sorted(p.name for p in (out / "selection").iterdir()) == ["step-4"]


def test_a_run_stopped_before_its_stage_end_evaluation_runs_it_once_on_resuming(package, selecting_run, tmp_path):
    """Stopped after its last checkpoint, before the stage's end was evaluated: the resumed run only loads that
    checkpoint, evaluates the last step once (logged at its step), and loads the chosen step's adapter."""
    out = tmp_path / "r"
    shutil.copytree(selecting_run[0], out)
    # what a run stopped then leaves: no stage-end candidate, no choice, no final adapter or evaluation
    record = json.loads((out / "selection.json").read_text())
    (out / "selection.json").write_text(json.dumps(
        {**record, "selected": None, "candidates": record["candidates"][:-1]}))
    rows = [r for r in read_jsonl(out / "metrics.jsonl") if not ("val/scripted" in r and r["step"] == 5)]
    (out / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    for name in ("eval.json", "eval_step5.json"):
        (out / name).unlink()
    shutil.rmtree(out / "adapter")
    summary = json.loads((out / "summary.json").read_text())
    (out / "summary.json").write_text(json.dumps({**summary, "status": "interrupted"}))

    assert_ok(run(package, out, *SELECTING, "trainer.resume_from_checkpoint=latest"))
    assert [r["step"] for r in read_jsonl(out / "metrics.jsonl") if "val/scripted" in r] == [1, 2, 3, 4, 5]
    record = json.loads((out / "selection.json").read_text())
    assert [c["step"] for c in record["candidates"]] == [1, 2, 3, 4, 5] and record["selected"]["step"] == 2
    chosen = lora_abs_sum(out / "checkpoints" / "checkpoint-2")
    assert lora_abs_sum(out / "adapter") == pytest.approx(chosen, rel=1e-6)
    assert json.loads((out / "eval.json").read_text())["lora_abs_sum"] == pytest.approx(chosen, rel=1e-5)


def test_a_warm_up_chooses_its_own_step_and_the_main_stage_starts_from_it(package, tmp_path):
    out = tmp_path / "r"
    values = "{warmup_step1: 0.1, warmup_step2: 0.8, warmup_step3: 0.3, step1: 0.1, step2: 0.2, step3: 0.7}"
    assert_ok(run(package, out, *SELECTING, "trainer.max_steps=3", "warmup=sft", "warmup.max_steps=3",
                  "warmup.save_steps=1", "warmup.logging_steps=1", f"+task.values={values}"))
    warmup = json.loads((out / "selection_warmup.json").read_text())
    assert warmup["selected"]["step"] == 2 and [c["tag"] for c in warmup["candidates"]] == [
        "warmup_step1", "warmup_step2", "warmup_step3"]
    chosen = lora_abs_sum(out / "warmup" / "checkpoints" / "checkpoint-2")
    assert abs(chosen - lora_abs_sum(out / "warmup" / "checkpoints" / "checkpoint-3")) > 1e-3
    after_warmup = json.loads((out / "eval_warmup.json").read_text())
    assert after_warmup["lora_abs_sum"] == pytest.approx(chosen, rel=1e-5) and held_out_splits(out, "warmup") == {
        "test"}
    assert json.loads((out / "selection.json").read_text())["selected"]["step"] == 3
    assert lora_abs_sum(out / "adapter") == pytest.approx(lora_abs_sum(out / "checkpoints" / "checkpoint-3"),
                                                          rel=1e-6)


@pytest.mark.slow
def test_two_processes_choose_the_same_step_and_save_its_adapter_once(package, tmp_path):
    """torchrun over two gloo processes: every process saves the adapter of a best step and loads the chosen one;
    the main process alone renames and records."""
    import subprocess
    import sys

    from tests.helpers.paths import PROJECT_ROOT

    out = tmp_path / "r"
    result = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node=2",
                             "-m", "ao_calib.run", *RUN, *SELECTING, "trainer.max_steps=3", f"hydra.run.dir={out}"],
                            check=False, cwd=PROJECT_ROOT, capture_output=True, text=True, timeout=900,
                            env={**os.environ, "OMP_NUM_THREADS": "1"})  # the package: on the fixture's PYTHONPATH
    assert_ok(result)
    assert json.loads((out / "selection.json").read_text())["selected"]["step"] == 2
    chosen = lora_abs_sum(out / "checkpoints" / "checkpoint-2")
    assert lora_abs_sum(out / "adapter") == pytest.approx(chosen, rel=1e-6)
    assert json.loads((out / "eval.json").read_text())["lora_abs_sum"] == pytest.approx(chosen, rel=1e-5)
    assert sorted(p.name for p in (out / "selection").iterdir()) == ["step-2"]


# ------------------------------------------------------------------------------------------- the rule itself

@pytest.mark.parametrize("metric, minimised", [("ece", True), ("text_rule_ece", True), ("brier_binned", True),
                                               ("aurc", True), ("val/loss", True), ("auroc", False),
                                               ("accuracy", False), ("args_reward", False)])
def test_auto_mode_minimises_error_like_figures(metric, minimised):
    assert lower_is_better(metric, "auto") is minimised
    assert lower_is_better(metric, "max") is False and lower_is_better(metric, "min") is True


def test_ties_go_to_the_earliest_step_and_nan_never_wins(tmp_path):
    selection = StageSelection(RunDir(tmp_path), "train", "ece", "auto")
    selection.take_up(None)
    for step, value in ((1, math.nan), (2, 0.3), (3, 0.1), (4, 0.1), (5, None)):
        selection.offer(step, f"step{step}", {"ece": value})
    assert selection.best()["step"] == 3
    only_nan = StageSelection(RunDir(tmp_path / "n"), "train", "ece", "auto")
    only_nan.take_up(None)
    for step in (1, 2):
        only_nan.offer(step, f"step{step}", {"ece": math.nan})
    record = only_nan.choose(last_step=2)
    assert record["selected"]["step"] == 2 and record["adapter"] is None  # today's behaviour: the last step


def test_a_resume_drops_the_candidates_after_its_checkpoint_and_their_adapters(tmp_path):
    """Stopped at step 5 with its newest checkpoint at step 3: steps 4 and 5 are evaluated again, so their
    candidates and the adapter saved for step 4 go; step 2's adapter, the best up to step 3, stays."""
    run_dir = RunDir(tmp_path)
    before = StageSelection(run_dir, "train", "accuracy", "max")
    before.take_up(None)
    saved = []
    for step, value in ((1, 0.1), (2, 0.5), (3, 0.2), (4, 0.9), (5, 0.3)):
        before.offer(step, f"step{step}", {"accuracy": value},
                     save_adapter=lambda path: (path.mkdir(parents=True), saved.append(path.name)))
    assert saved == ["step-1.partial", "step-2.partial", "step-4.partial"]
    resumed = StageSelection(run_dir, "train", "accuracy", "max")
    resumed.take_up(3)
    assert [c["step"] for c in resumed.candidates] == [1, 2, 3] and resumed.best()["step"] == 2
    assert sorted(p.name for p in (tmp_path / "selection").iterdir()) == ["step-1", "step-2"]
    assert [c["step"] for c in json.loads(run_dir.selection().read_text())["candidates"]] == [1, 2, 3]
    with pytest.raises(Exception, match="eval.select_metric=ece"):
        StageSelection(run_dir, "train", "ece", "auto").take_up(3)  # chosen by another figure before the stop
