"""A new user's first hour: a tiny run makes no network lookup, re-evaluation never replaces the run's own result,
the plot reads as one run, --help shows examples and no schema, and the docs name the files the code writes."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from ao_calib.reporting.plot import global_steps, plot_run, run_title
from ao_calib.runs.records import SweepFiles
from ao_calib.runs.run_dir import RunDir
from tests.helpers.commands import assert_ok, help_page, run_cli
from tests.helpers.paths import CONF_DIR, PROJECT_ROOT
from tests.helpers.runs import copy_run, offline_function_call_run


@pytest.fixture(scope="module")
def offline_run(tmp_path_factory) -> tuple[Path, Path, Path]:
    """A tiny GRPO run with wandb, with no offline variable set and every name lookup refused:
    ``(run dir, lookup log, its temp dir)``; the run is a copy of the one test_readme_commands also reads
    (made once per test process), so the tests here may write into it."""
    run, lookups, tmp = offline_function_call_run(tmp_path_factory.getbasetemp() / "offline_function_call_run")
    return copy_run(run, tmp_path_factory.mktemp("first_hour") / "run"), lookups, tmp


def test_a_tiny_run_looks_up_no_host_and_leaves_no_temp_folder(offline_run):
    run, lookups, tmp = offline_run
    assert not lookups.exists(), f"name lookups attempted:\n{lookups.read_text()[:4000]}"
    assert json.loads(RunDir(run).summary.read_text())["wandb_run_id"]  # wandb ran, offline
    assert list(tmp.iterdir()) == []  # wandb-media / wandb-artifacts went with the run's own temp folder


def test_reevaluation_never_replaces_the_runs_own_result(offline_run):
    run, _, _ = offline_run
    own = RunDir(run).eval_report().read_bytes()
    own_predictions = RunDir(run).predictions().read_bytes()
    result = run_cli("ao_calib.eval", f"run_dir={run}", "num_samples=2")
    assert_ok(result)
    written = sorted(p.name for p in run.glob("eval_reeval_*.json"))
    assert len(written) == 1 and f"wrote {run / written[0]}" in result.stdout
    assert "eval.json is unchanged" in result.stdout
    assert RunDir(run).eval_report().read_bytes() == own
    assert RunDir(run).predictions().read_bytes() == own_predictions

    for tag in ("final", written[0][len("eval_"):-len(".json")]):  # an existing tag is refused
        refused = run_cli("ao_calib.eval", f"run_dir={run}", "num_samples=2", f"tag={tag}")
        assert refused.returncode == 2 and "overwrite=true" in refused.stderr, refused.stderr[-2000:]
    assert RunDir(run).eval_report().read_bytes() == own


def test_eval_help_lists_its_options():
    result = help_page("ao_calib.eval", "--help")
    assert_ok(result)
    for option in ("run_dir", "num_samples", "adapter", "temperature", "tag", "overwrite"):
        assert re.search(rf"^  {option}\s", result.stdout, re.M), option
    bad = run_cli("ao_calib.eval", "run_dir=x", "nmu_samples=3")
    assert bad.returncode == 2 and "nmu_samples" in bad.stderr and "options:" in bad.stderr


def test_plot_of_a_real_run_is_written_with_its_names(offline_run):
    run, _, _ = offline_run
    result = run_cli("ao_calib.plot", str(run))
    assert_ok(result)
    assert RunDir(run).curves_plot().stat().st_size > 0
    assert run_title(run).startswith("function_call · tiny_qwen3 · grpo · function_call_tiny")


def test_stages_and_a_resume_make_one_continuous_step(tmp_path):
    rows = [{"step": s, "stage": "warmup", "loss": 1.0 / s} for s in range(1, 6)]
    rows += [{"step": 1, "stage": "train", "reward": 0.1}, {"step": 2, "stage": "train", "reward": 0.2},
             {"step": 2, "stage": "train", "val/accuracy": 0.5},
             {"step": 3, "stage": "train", "reward": 0.3}, {"step": 4, "stage": "train", "reward": 0.4}]
    rows += [{"step": s, "stage": "train", "reward": 0.2 * s} for s in range(3, 7)]  # resumed from checkpoint-2
    (tmp_path / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    placed, stages = global_steps(rows)
    assert [(s.name, s.start, s.end) for s in stages] == [("warmup", 0, 5), ("train", 5, 11)]
    train = [(x, round(r["reward"], 6)) for x, stage, r in placed if stage == "train" and "reward" in r]
    assert train == [(6, 0.1), (7, 0.2), (8, 0.6), (9, 0.8), (10, 1.0), (11, 1.2)]  # the resume replaced 3 and 4
    assert [x for x, _, r in placed if "val/accuracy" in r] == [7]
    assert plot_run(tmp_path) == [RunDir(tmp_path).curves_plot()]


def test_run_help_shows_examples_and_only_options_a_user_can_pick():
    result = help_page("ao_calib.run", "--help")
    assert_ok(result)
    assert "python -m ao_calib.run experiment=quickstart" in result.stdout.split("Pick one option")[0]
    assert "_schema" not in result.stdout
    groups = dict(re.findall(r"^  (\w+): (.+)$", result.stdout, re.M))
    for group_dir in CONF_DIR.iterdir():
        if group_dir.is_dir() and group_dir.name not in ("hydra", "accelerate"):
            assert groups[group_dir.name].split(", ") == sorted(p.stem for p in group_dir.glob("*.yaml"))


def test_the_hint_after_a_model_this_machine_cannot_run_repeats_the_users_command():
    result = run_cli("ao_calib.run", "task=function_call", "trainer.max_steps=5")
    assert result.returncode == 2
    assert "python -m ao_calib.run task=function_call trainer.max_steps=5 model=tiny_qwen3" in result.stderr


def test_outputs_readme_names_the_files_the_code_writes():
    text = (PROJECT_ROOT / "outputs" / "README.md").read_text()
    named = [t for t in re.findall(r"`([^`\s]+)`", text)
             if re.fullmatch(r"[\w/-]+\.(\{[\w,]+\}|json|jsonl|yaml|csv|md|png)", t) and not t.endswith(".py")]
    expanded = {f"{stem}.{ext}" for name in named for stem, exts in [name.rsplit(".", 1)]
                for ext in exts.strip("{}").split(",")}
    run = RunDir("r")
    written = {RunDir.METRICS, RunDir.COMPLETIONS, RunDir.SUMMARY, RunDir.CONFIG, run.eval_report().name,
               run.predictions().name, str(run.curves_plot().relative_to(run.path)),
               *(p.name for p in (SweepFiles("s").csv, SweepFiles("s").md, SweepFiles("s").png))}
    assert expanded and expanded <= written, expanded - written


def test_the_closing_block_ends_with_the_headline_table_and_the_files(tmp_path, capsys):
    from ao_calib.evaluation.config import ClosingTable
    from ao_calib.reporting.summary import print_final_screen

    oracle = {"accuracy": 0.7, "auroc": None, "ece": 0.1, "brier": 0.2, "confidence_std": 0.08}  # null: not computable
    for tag, extra in (("warmup", {}), ("final", {"ast_accuracy/simple": 0.5, "ast_accuracy/multiple": 0.25})):
        RunDir(tmp_path).eval_report(tag).write_text(json.dumps(
            {"tag": tag, "metrics": {**oracle, **extra}, "variants": {"control": {"accuracy": 0.45}}}))
    summary = {"status": "completed", "wall_time_s": 3.0, "final_metrics": {"reward": 0.1}, "run_dir": str(tmp_path),
               "alerts": {"references_over_eval_budget": {"step": 0, "message": "1 of 8 held-out ..."},
                          "confidence_collapse": {"step": 3, "message": "confidence std 0.0 < 0.1"}}}
    print_final_screen(summary)
    lines = capsys.readouterr().out.splitlines()
    alert = next(i for i, line in enumerate(lines) if "ALERT confidence_collapse (step 3)" in line)
    assert any("ALERT references_over_eval_budget (at start-up): 1 of 8" in line for line in lines[:alert])
    header = next(i for i, line in enumerate(lines) if line.split()[:1] == ["evaluation"])
    assert alert < header
    # the headline columns a newcomer reads, a task's per-category accuracy included; the others behind an option
    assert lines[header].split()[1:5] == ["acc", "control", "AUROC", "ECE"]
    assert "AST simple" in lines[header] and "AST multiple" in lines[header]
    assert "Brier" not in lines[header] and "conf std" not in lines[header]
    assert lines[header + 2].split()[:4] == ["final", "0.700", "0.450", "nan"]
    legend = lines[header + 4:]
    assert legend[0].startswith(" acc: accuracy; control: ") and "AUROC: " in legend[0] and "AST <category>" in legend[0]
    assert legend[1].startswith(" nan: not computable")
    assert legend[2] == " -: not reported by that evaluation"  # the warm-up has no AST columns
    assert legend[3].startswith(" eval.closing_table=full adds Brier, conf std")
    assert any(f"run directory: {tmp_path}" in line for line in lines[header:])
    assert lines[-2] == f" curves: python -m ao_calib.plot {tmp_path}"  # started as python -m, not as ao-calib

    print_final_screen(summary, ClosingTable.full)
    full = capsys.readouterr().out.splitlines()
    assert next(line for line in full if line.split()[:1] == ["evaluation"]).split()[1:6] == [
        "acc", "control", "AUROC", "ECE", "Brier"]
    assert not any("closing_table=full adds" in line for line in full)


def test_the_readmes_smoke_run_is_told_it_is_too_short_to_learn():
    """The README's smoke run trains its stages for a small fraction of the quickstart's steps: under the default
    alerts.short_run_fraction each is too short, which the closing block says (the README says so too)."""
    from ao_calib.config.compose import compose_run_config
    from ao_calib.monitoring.config import AlertsConfig
    from ao_calib.config.short_run import ALERT, short_stages

    readme = (PROJECT_ROOT / "README.md").read_text()
    line = re.search(r"A faster smoke run: `python -m ao_calib.run ([^`]+)`", readme).group(1).split()
    assert any(word.endswith(".max_steps=20") for word in line) and ALERT in readme
    preset = [word for word in line if not word.split("=")[0].endswith("max_steps")]
    short = short_stages(compose_run_config(line), compose_run_config(preset), AlertsConfig().short_run_fraction)
    assert short == [("warmup", 20, 1500), ("trainer", 2, 150)]
    assert short_stages(compose_run_config(preset), compose_run_config(preset), 1.0) == []  # the preset's own


def test_a_presets_warmup_can_be_dropped_to_start_from_a_saved_one():
    """warmup.enabled=false: only the main stage runs (e.g. GRPO from trainer.init_from=<a warm-up checkpoint>),
    and the task is told no SFT stage runs."""
    from ao_calib.config.checks import run_stages
    from ao_calib.config.compose import compose_run_config
    from ao_calib.task_api import TaskContext

    kept = compose_run_config(["experiment=oracle_smollm2"])
    dropped = compose_run_config(["experiment=oracle_smollm2", "warmup.enabled=false"])
    assert [name for name, _ in run_stages(kept)] == ["warmup", "train"]
    assert [name for name, _ in run_stages(dropped)] == ["train"]
    assert TaskContext.of(kept).stages == ("sft", "grpo")
    assert TaskContext.of(dropped).stages == ("grpo",)
