"""End to end, as a user runs it: GRPO on the tiny Qwen3, the eval CLI, resuming, a sweep and its report."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from ao_calib_tasks.function_call.bfcl_checker import score_text

from tests.helpers.bfcl_rows import write_multi_turn_folder
from tests.helpers.commands import assert_ok, run_cli
from tests.helpers.files import read_jsonl

CURRICULUM = ("reward.phases=[{until_step:2,weights:{tool_call_function:0.8,tool_call_parseable:0.2}},"
              "{until_step:null,weights:{tool_call_exact:1.0}}]")


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("run") / "r"
    assert_ok(run_cli("ao_calib.run", "experiment=function_call_tiny", "trainer.max_steps=3",
                      "reward=function_call_progressive", CURRICULUM, "logger=wandb", "eval.initial=false",
                      f"hydra.run.dir={out}"))
    return out


# function_call_demo with a two-step warm-up that checkpoints every step, then two main-stage steps evaluated
# during the main stage only: one run read by the warm-up-evaluation test and copied by each resume test.
WARMUP_RUN = ("experiment=function_call_demo", "warmup.max_steps=2", "warmup.save_steps=1", "warmup.logging_steps=1",
              "trainer.max_steps=2", "trainer.batch_size=2", "trainer.num_generations=2", "trainer.logging_steps=1",
              "trainer.max_completion_length=16", "eval.max_new_tokens=16", "eval.initial=false",
              "eval.num_samples=2", "eval.every_steps=1", "eval.during_num_samples=2", "eval.during_warmup=false")


@pytest.fixture(scope="module")
def warmup_run(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("warmup_run") / "r"
    assert_ok(run_cli("ao_calib.run", *WARMUP_RUN, f"hydra.run.dir={out}"))
    return out


def test_run_directory_is_complete(run_dir):
    for name in (".hydra/config.yaml", ".hydra/overrides.yaml", "metrics.jsonl", "completions.jsonl",
                 "eval.json", "eval_predictions.jsonl", "summary.json", "adapter/adapter_config.json",
                 "checkpoints/checkpoint-2/adapter_model.safetensors", "checkpoints/checkpoint-3/optimizer.pt"):
        assert (run_dir / name).exists(), name
    config = yaml.safe_load((run_dir / ".hydra/config.yaml").read_text())
    assert config["model"]["name"] == "tiny_qwen3" and config["trainer"]["max_steps"] == 3


def test_metrics_hold_every_reward_component_each_step(run_dir):
    rows = [r for r in read_jsonl(run_dir / "metrics.jsonl") if "reward" in r]
    assert [r["step"] for r in rows] == [1, 2, 3]
    for r in rows:
        for name in ("tool_call_function", "tool_call_parseable", "tool_call_exact"):
            assert f"rewards/{name}/mean" in r and f"rewards/{name}/std" in r
        assert {"loss", "kl", "learning_rate", "completions/mean_length"} <= r.keys()


def test_curriculum_switches_weights_within_the_run(run_dir):
    weights = {r["step"]: {k.split("/")[1]: v for k, v in r.items() if k.startswith("reward_weight/")}
               for r in read_jsonl(run_dir / "metrics.jsonl") if "reward" in r}
    assert weights[1] == {"tool_call_function": 0.8, "tool_call_parseable": 0.2,
                          "tool_call_exact": 0.0}
    assert weights[3] == {"tool_call_function": 0.0, "tool_call_parseable": 0.0, "tool_call_exact": 1.0}


def test_completions_are_sampled_with_component_rewards(run_dir):
    samples = read_jsonl(run_dir / "completions.jsonl")
    assert len(samples) == 3 * 4  # completions_logged_per_step per generation batch
    for s in samples:
        assert set(s["rewards"]) == {"tool_call_function", "tool_call_parseable", "tool_call_exact"}
        assert isinstance(s["completion"], list) and s["prompt"][0]["role"] == "user"


def test_summary_and_eval(run_dir):
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["status"] == "completed"
    assert summary["wall_time_s"] > 0 and summary["git_commit"]
    assert summary["wandb_run_id"]  # offline wandb: no API key in the test environment
    assert "reward" in summary["final_metrics"]
    # the preset's budgets fit its own data, and its own steps are not "too short": no alert about itself
    assert not [name for name in summary["alerts"] if name.startswith("references_over_")], summary["alerts"]
    assert "too_short_to_learn" not in summary["alerts"]
    eval_json = json.loads((run_dir / "eval.json").read_text())
    assert eval_json["num_samples"] == 8
    assert {"accuracy", "tool_call_exact", "tool_call_function", "tool_call_params"} <= eval_json["metrics"].keys()
    assert len(read_jsonl(run_dir / "eval_predictions.jsonl")) == 8


def test_eval_cli_on_a_saved_run(run_dir):
    result = run_cli("ao_calib.eval", f"run_dir={run_dir}", "num_samples=3", "tag=cli")
    assert_ok(result)
    assert "[eval:cli] 3 samples" in result.stdout
    assert json.loads((run_dir / "eval_cli.json").read_text())["num_samples"] == 3
    bad = run_cli("ao_calib.eval", f"run_dir={run_dir / 'nope'}")
    assert bad.returncode == 2 and "not a run directory" in bad.stderr


def test_eval_cli_scores_a_bfcl_folder_per_category(run_dir):
    """`ao_calib.eval ... task.data.test_path=DIR` scores a saved run on another held-out set: here a folder in
    BFCL's own layout (question files + possible_answer/), AST accuracy per category and overall."""
    folder = Path(__file__).parents[1] / "data" / "bfcl"
    # no num_samples=: all 36 rows of the folder, not the run's eval.num_samples (8, sized for its own split)
    result = run_cli("ao_calib.eval", f"run_dir={run_dir}", "task.data.format=bfcl", f"task.data.test_path={folder}",
                     "max_new_tokens=8", "tag=bfcl_fixture")
    assert_ok(result)
    assert "task.data.test_path=" in result.stdout and "scoring all 36 rows" in result.stdout
    report = json.loads((run_dir / "eval_bfcl_fixture.json").read_text())
    assert report["num_samples"] == 36
    for category in ("simple_python", "multiple", "parallel", "parallel_multiple"):
        assert 0.0 <= report["metrics"][f"ast_accuracy/{category}"] <= 1.0
    rows = read_jsonl(run_dir / "eval_predictions_bfcl_fixture.jsonl")
    assert len(rows) == 36 and {r["kind"] for r in rows} == {"simple_python", "multiple", "parallel",
                                                              "parallel_multiple"}
    assert report["metrics"]["bfcl_ast"] == sum(r["scores"]["bfcl_ast"] for r in rows) / 36
    # each row holds its case: rescored from the row alone, it gets the score it was given
    assert len({r["id"] for r in rows}) == 36
    for r in rows:
        case = json.loads(r["bfcl_functions"]), json.loads(r["bfcl_ground_truth"])
        assert score_text(r["completion"], *case).valid == (r["scores"]["bfcl_ast"] == 1.0), r["id"]
    bad = run_cli("ao_calib.eval", f"run_dir={run_dir}", "task.data.nope=1", "tag=never")
    assert bad.returncode == 2 and "task.data.nope" in bad.stderr
    assert not (run_dir / "eval_never.json").exists()


def test_eval_cli_plays_and_scores_bfcl_multi_turn_cases(run_dir, tmp_path):
    """The same command on BFCL multi-turn question files: each case an episode over its API instances, its later
    user turns fed one at a time, scored by BFCL's checker per category, each prediction row holding its episode."""
    multi_turn = pytest.importorskip("ao_calib_tasks.function_call.bfcl_multi_turn")
    pytest.importorskip("bfcl_eval")
    cases = multi_turn.load_cases("multi_turn_base")[:2]
    write_multi_turn_folder(tmp_path, {"multi_turn_base": cases})
    result = run_cli("ao_calib.eval", f"run_dir={run_dir}", "task.data.format=bfcl", f"task.data.test_path={tmp_path}",
                     "max_new_tokens=8", "tag=bfcl_multi_turn")
    assert_ok(result)
    report = json.loads((run_dir / "eval_bfcl_multi_turn.json").read_text())
    assert report["num_samples"] == 2 and 0.0 <= report["metrics"]["ast_accuracy/multi_turn_base"] <= 1.0
    rows = read_jsonl(run_dir / "eval_predictions_bfcl_multi_turn.jsonl")
    assert [r["id"] for r in rows] == [c["id"] for c in cases]
    for row, case in zip(rows, cases):
        users = [m for m in row["episode"] if m["role"] == "user"]
        assert len(users) == len(case["question"]) - 1  # every later turn was fed
        assert set(row["scores"]) >= {"bfcl_ast", "turns_passed", "calls", "fail_empty_turn_model_response"}


def test_resume_continues_from_the_latest_checkpoint(run_dir):
    assert_ok(run_cli("ao_calib.run", "experiment=function_call_tiny", "trainer.max_steps=4",
                      "trainer.resume_from_checkpoint=latest", "eval.enabled=false", f"hydra.run.dir={run_dir}"))
    steps = [r["step"] for r in read_jsonl(run_dir / "metrics.jsonl") if "reward" in r]
    assert steps == [1, 2, 3, 4]  # step 4 trained after resuming from checkpoint-3, not from scratch


@pytest.mark.parametrize("kept", [1, 2])
def test_a_run_stopped_before_the_main_stage_saved_resumes_its_warm_up(warmup_run, tmp_path, kept):
    """A run stopped in its warm-up (or after it, before the main stage's first checkpoint) takes the warm-up up
    from its own newest checkpoint with trainer.resume_from_checkpoint=latest, instead of starting again: a run
    whose main-stage checkpoints and end are gone, with the warm-up's checkpoints up to step ``kept`` of 2 left.
    Each warm-up and main-stage step is logged exactly once; a warm-up kept whole is only loaded, and its
    evaluation, already written, is not repeated."""
    import shutil

    out = tmp_path / "r"
    shutil.copytree(warmup_run, out)  # file times kept: the checks below compare them
    # what a run killed in its warm-up (kept=1), or just after it (kept=2), leaves behind
    shutil.rmtree(out / "checkpoints")
    shutil.rmtree(out / "adapter")
    for later in (out / "warmup" / "checkpoints").glob("checkpoint-*"):
        if int(later.name.split("-")[1]) > kept:
            shutil.rmtree(later)
    rows = read_jsonl(out / "metrics.jsonl")
    warmup_end = out / "eval_warmup.json"
    if kept < 2:
        warmup_end.unlink()
        rows = [r for r in rows if r.get("stage") == "warmup" and r.get("step", 0) <= kept]
    (out / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    summary = json.loads((out / "summary.json").read_text())
    (out / "summary.json").write_text(json.dumps({**summary, "status": "interrupted"}))
    written = warmup_end.stat().st_mtime_ns if kept == 2 else None
    saved = (out / "warmup" / "checkpoints" / f"checkpoint-{kept}" / "trainer_state.json").stat().st_mtime_ns

    result = run_cli("ao_calib.run", *WARMUP_RUN, f"hydra.run.dir={out}", "trainer.resume_from_checkpoint=latest")
    assert_ok(result)
    assert f"resuming the warmup stage at step {kept}" in result.stdout + result.stderr
    rows = read_jsonl(out / "metrics.jsonl")
    assert [r["step"] for r in rows if r.get("stage") == "warmup" and "loss" in r] == [1, 2]
    # taken up after step `kept`: its checkpoint was not written again by a warm-up started from scratch
    assert (out / "warmup" / "checkpoints" / f"checkpoint-{kept}" / "trainer_state.json").stat().st_mtime_ns == saved
    assert [r["step"] for r in rows if r.get("stage", "train") == "train" and "reward" in r] == [1, 2]
    assert json.loads((out / "summary.json").read_text())["status"] == "completed"
    assert (out / "checkpoints" / "checkpoint-2").is_dir() and (out / "adapter").is_dir()
    if kept == 2:
        assert warmup_end.stat().st_mtime_ns == written  # the warm-up's evaluation was not run again


def test_sweep_then_report(tmp_path):
    sweep = tmp_path / "sweep"
    result = run_cli("ao_calib.run", "-m", "experiment=function_call_tiny", "trainer.max_steps=2",
                     "trainer.lr=1e-5,3e-5", "eval.num_samples=2", "eval.initial=false",
                     f"hydra.sweep.dir={sweep}")
    assert_ok(result)
    jobs = sorted(p.name for p in sweep.iterdir() if (p / "summary.json").exists())
    assert jobs == ["experiment=function_call_tiny,trainer.lr=1e-5,trainer.max_steps=2,eval.num_samples=2,"
                    "eval.initial=false",
                    "experiment=function_call_tiny,trainer.lr=3e-5,trainer.max_steps=2,eval.num_samples=2,"
                    "eval.initial=false"] or \
        len(jobs) == 2 and all("trainer.lr=" in j for j in jobs)
    assert (sweep / "report.md").exists() and (sweep / "report.csv").exists()  # written when the sweep ended
    report = run_cli("ao_calib.report", str(sweep), "--out", str(tmp_path / "report"))
    assert_ok(report)
    assert "trainer.lr" in report.stdout and "completed" in report.stdout
    assert (tmp_path / "report" / "reward_curves.png").stat().st_size > 0


def test_gemma3_layout_trains_too(tmp_path):
    out = tmp_path / "gemma"
    assert_ok(run_cli("ao_calib.run", "experiment=function_call_tiny", "model=tiny_gemma3", "trainer.max_steps=1",
                      "eval.num_samples=2", "eval.initial=false", f"hydra.run.dir={out}"))
    summary = json.loads((out / "summary.json").read_text())
    assert summary["status"] == "completed" and "rewards/tool_call_exact/mean" in summary["final_metrics"]


def test_evaluations_during_training_can_skip_the_warm_up(warmup_run):
    """eval.during_warmup=false: the curve covers the main stage only; the evaluation after the warm-up stays."""
    reports = sorted(p.name for p in warmup_run.glob("eval*.json"))
    assert reports == ["eval.json", "eval_step1.json", "eval_warmup.json"]
    curve = [r for r in read_jsonl(warmup_run / "metrics.jsonl") if "val/accuracy" in r]
    assert [(r.get("stage"), r["step"]) for r in curve] == [("train", 1)]


def test_calibrated_function_call_reward_and_eval(tmp_path):
    out = tmp_path / "cal"
    assert_ok(run_cli("ao_calib.run", "experiment=function_call_tiny", "reward=calibrated_function_call",
                      "trainer.max_steps=2", "eval.num_samples=4", "eval.every_steps=1", "eval.during_num_samples=2",
                      "eval.initial=false", f"hydra.run.dir={out}"))
    validation = [r for r in read_jsonl(out / "metrics.jsonl") if "val/accuracy" in r]
    assert [r["step"] for r in validation] == [1] and "val/brier" in validation[0]  # not again at the last step
    assert json.loads((out / "eval_step1.json").read_text())["num_samples"] == 2
    rows = [r for r in read_jsonl(out / "metrics.jsonl") if "reward" in r]
    assert "rewards/calibrated_overall/mean" in rows[0] and "calibration/brier" in rows[0]
    metrics = json.loads((out / "eval.json").read_text())["metrics"]
    assert {"ece", "mce", "brier", "tool_call_exact"} <= metrics.keys()
    assert (out / "reliability_final.png").exists()
    sample = read_jsonl(out / "completions.jsonl")[0]
    assert "[epistemic status: NN]" in sample["prompt"][0]["content"]


@pytest.mark.parametrize("key", ["warmup.resume_from_checkpoint=latest", "warmup.seed=7", "warmup.init_from=/x"])
def test_a_warm_up_key_the_run_takes_from_the_trainer_is_refused_at_start_up(key, tmp_path):
    """The warm-up inherits these keys from the trainer's schema, but the run reads them off trainer.* for both
    stages: set on the warm-up they are refused by key before any model loads, naming the trainer's key."""
    out = tmp_path / "refused"
    result = run_cli("ao_calib.run", "experiment=function_call_demo", key, f"hydra.run.dir={out}")
    name = key.split("=")[0].split(".")[1]
    assert result.returncode == 2 and f"warmup.{name}=" in result.stderr and f"trainer.{name}=" in result.stderr
    assert not (out / "summary.json").exists()
