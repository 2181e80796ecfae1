"""The options of ``ao_calib.eval``, ``export``, ``score``, ``report`` and ``plot``: each typed in as ``key=value``,
listed by ``--help`` with its default, and refused by name (one line, exit 2) before the command does any work, a
model load above all. And the documented re-evaluation on a BFCL folder, on a run trained on the default format."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from omegaconf import OmegaConf

from ao_calib.config.compose import compose_run_config
from ao_calib.core.errors import AOCalibError
from ao_calib.eval import main as eval_main
from ao_calib.export import main as export_main
from ao_calib.reporting.plot import main as plot_main
from ao_calib.reporting.report import main as report_main
from ao_calib.runs.run_dir import RunDir
from ao_calib.score import main as score_main
from tests.helpers.bfcl_rows import completion_rows
from tests.helpers.commands import assert_ok, run_cli
from tests.helpers.fake_runs import make_run, metric_steps

BFCL_FOLDER = Path(__file__).parents[1] / "data" / "bfcl"
COMMANDS = {"eval": eval_main, "export": export_main, "score": score_main, "report": report_main, "plot": plot_main}


def refused(capsys, main, argv: list[str], key: str) -> str:
    """The one-line refusal of ``argv``, which names ``key``."""
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: ") and "\n" not in err, err
    assert key in err, err
    return err


@pytest.fixture(scope="module")
def unloadable_run(tmp_path_factory) -> Path:
    """A run directory (config, adapter) whose model cannot be loaded: a command that reaches the model fails
    there, so one refused with its own option's message refused it before any model load."""
    run = tmp_path_factory.mktemp("unloadable")
    missing = run / "no-such-model"
    cfg = compose_run_config(["experiment=function_call_tiny", "model.tiny=null", f"model.hub_id={missing}",
                              "model.requires_gpu=false", "model.num_hidden_layers=2"])
    OmegaConf.save(cfg, run / RunDir.CONFIG)
    (run / "adapter").mkdir()
    (run / "adapter" / "adapter_config.json").write_text("{}")
    with pytest.raises(Exception, match="no-such-model"):  # valid options get as far as the model, and stop there
        eval_main([f"run_dir={run}", "num_samples=2", "tag=probe"])
    return run


@pytest.mark.parametrize(("option", "key"), [
    ("num_samples=-2", "num_samples=-2"), ("batch_size=0", "batch_size=0"), ("max_new_tokens=0", "max_new_tokens"),
    ("temperature=-1", "temperature=-1"), ("confidence_decoding=median", "confidence_decoding=median"),
    ("overwrite=maybe", "overwrite=maybe"), ("tag=../elsewhere", "tag=../elsewhere"), ("nmu_samples=3", "nmu_samples"),
    ("task.data.test_path=no/such/folder", "task.data.test_path=no/such/folder"),
])
def test_eval_refuses_a_bad_option_by_name_before_the_model_loads(unloadable_run, capsys, option, key):
    err = refused(capsys, eval_main, [f"run_dir={unloadable_run}", option], key)
    if option.startswith("confidence_decoding"):
        assert "most_likely, expected, mean" in err
    assert not list(unloadable_run.glob("eval_*.json"))


@pytest.mark.parametrize(("option", "key"), [("merge=maybe", "merge=maybe"), ("private=perhaps", "private"),
                                             ("nope=1", "nope"), ("out=FILE", "out=")])
def test_export_refuses_a_bad_option_by_name_before_the_model_loads(unloadable_run, tmp_path, capsys, option, key):
    out = tmp_path / "export"
    (tmp_path / "FILE").write_text("x")
    argv = [f"run_dir={unloadable_run}", option.replace("FILE", str(tmp_path / "FILE"))]
    refused(capsys, export_main, argv if option.startswith("out=") else [*argv, f"out={out}"], key)
    assert not out.exists() and (tmp_path / "FILE").read_text() == "x"


def test_score_refuses_an_output_folder_and_a_repeated_option_before_scoring(tmp_path, capsys):
    source = tmp_path / "in.jsonl"
    source.write_text("".join(json.dumps(r) + "\n" for r in completion_rows()))
    folder = tmp_path / "folder"
    folder.mkdir()
    refused(capsys, score_main, ["task=function_call", f"input={source}", f"output={folder}"], "output=")
    target = tmp_path / "out.jsonl"
    refused(capsys, score_main, ["task=function_call", f"input={source}", f"input={source}", f"output={target}"],
            "input= given twice")
    assert list(folder.iterdir()) == [] and not target.exists()


def test_report_and_plot_take_key_value_and_their_flags(tmp_path, capsys):
    run = make_run(tmp_path / "runs" / "a", ["x=1"], metrics=metric_steps(3, 0.2), summary={"status": "completed"})
    assert report_main([f"path={run.parent}", f"out={tmp_path / 'kv'}"]) == 0
    assert report_main([str(run.parent), "--out", str(tmp_path / "flag")]) == 0
    assert (tmp_path / "kv" / "report.csv").is_file() and (tmp_path / "flag" / "report.csv").is_file()
    assert plot_main([f"run_dir={run}", f"out={tmp_path / 'curves.pdf'}"]) == 0
    assert plot_main([str(run), f"--out={tmp_path / 'curves.png'}"]) == 0
    assert (tmp_path / "curves.pdf").stat().st_size > 0 and (tmp_path / "curves.png").stat().st_size > 0


@pytest.mark.parametrize(("command", "option", "key"), [
    ("report", "nope=1", "nope"), ("report", "--nope=1", "nope"), ("report", "out=FILE", "out="),
    ("plot", "nope=1", "nope"), ("plot", "out=curves.txt", "out="), ("plot", "--out=curves.txt", "out="),
])
def test_report_and_plot_refuse_a_bad_option_by_name_before_writing(tmp_path, capsys, command, option, key):
    run = make_run(tmp_path / "runs" / "a", ["x=1"], metrics=metric_steps(3, 0.2), summary={"status": "completed"})
    (tmp_path / "FILE").write_text("x")
    option = option.replace("FILE", str(tmp_path / "FILE")).replace("curves.txt", str(tmp_path / "curves.txt"))
    refused(capsys, COMMANDS[command], [str(run if command == "plot" else run.parent), option], key)
    assert not (run / "plots").exists() and not (run.parent / "report.csv").exists()
    assert not (tmp_path / "curves.txt").exists()


HELP_DEFAULTS = {
    "eval": {"run_dir": "(required)", "num_samples": "null", "adapter": "null", "batch_size": "null",
             "max_new_tokens": "null", "temperature": "null", "confidence_decoding": "null", "tag": "null",
             "overwrite": "false", "task.KEY=VALUE": ""},
    "export": {"run_dir": "(required)", "merge": "false", "out": "null", "push_to_hub": "null", "private": "true"},
    "score": {"task": "(required)", "input": "(required)", "output": "(required)", "KEY=VALUE": ""},
    "report": {"path": "(required)", "out": "null"},
    "plot": {"run_dir": "(required)", "out": "null"},
}


@pytest.mark.parametrize("command", sorted(HELP_DEFAULTS))
def test_help_lists_every_option_with_its_default_and_what_it_does(capsys, command):
    assert COMMANDS[command](["--help"]) == 0
    text = capsys.readouterr().out
    for option, default in HELP_DEFAULTS[command].items():
        assert re.search(rf"^  {re.escape(option)}\s+{re.escape(default)}\s+\w", text, re.M), (option, text)
    if command == "eval":  # every value it takes, and the ranges the run's own eval.* keys allow
        line = text[text.index("  confidence_decoding"):text.index("  tag ")]
        assert all(value in line for value in ("most_likely", "expected", "mean"))
        assert re.search(r"^  batch_size .*Allowed: >= 1 or null", text, re.M)


def test_a_rows_file_beside_a_bfcl_folder_is_refused_naming_both_keys(tmp_path):
    rows = tmp_path / "train.jsonl"
    rows.write_text("{}\n")
    with pytest.raises(AOCalibError, match=r"task\.data\.test_path=.* BFCL's layout.*task\.data\.train_path"):
        compose_run_config(["task=function_call", f"task.data.test_path={BFCL_FOLDER}",
                            f"task.data.train_path={rows}"])


@pytest.fixture(scope="module")
def rows_run(tmp_path_factory) -> Path:
    """A tiny function-calling run trained on the default data format (rows), short answers, evaluated in one batch
    of the BFCL folder's 36 rows (its eval.batch_size, which the eval command takes up)."""
    out = tmp_path_factory.mktemp("rows_run") / "r"
    assert_ok(run_cli("ao_calib.run", "experiment=function_call_tiny", "trainer.max_steps=1",
                      "trainer.max_completion_length=8", "eval.enabled=false", "eval.batch_size=36",
                      f"hydra.run.dir={out}"))
    assert OmegaConf.load(out / RunDir.CONFIG).task.data.format == "rows"
    return out


def test_eval_scores_a_bfcl_folder_as_documented_without_a_format_key(rows_run):
    """README's command as written: `python -m ao_calib.eval run_dir=RUN task.data.test_path=DIR`, DIR in BFCL's
    layout, on a run trained on rows: read as BFCL data, every row scored with BFCL's AST check per category."""
    result = run_cli("ao_calib.eval", f"run_dir={rows_run}", f"task.data.test_path={BFCL_FOLDER}")
    assert_ok(result)
    assert "read as task.data.format=bfcl" in result.stdout + result.stderr
    written = list(rows_run.glob("eval_reeval_*.json"))
    assert len(written) == 1
    report = json.loads(written[0].read_text())
    assert report["num_samples"] == 36 and report["headline_metric"] == "bfcl_ast"
    for category in ("simple_python", "multiple", "parallel", "parallel_multiple"):
        assert 0.0 <= report["metrics"][f"ast_accuracy/{category}"] <= 1.0
    tag = written[0].stem[len("eval_"):]
    rows = [json.loads(line) for line in RunDir(rows_run).predictions(tag).read_text().splitlines()]
    assert len(rows) == 36 and {r["kind"] for r in rows} == {"simple_python", "multiple", "parallel",
                                                              "parallel_multiple"}
