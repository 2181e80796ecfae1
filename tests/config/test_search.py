"""An optimising sweep (``hparams_search``) optimises a validation figure only: a search on the test split, without
a final evaluation, with one moved to the test split or optimising its figure the wrong way is refused at start-up
(exit 2, naming the key, before any run directory); a real tiny search returns each trial's ``search.objective`` from
its evaluation of the validation split."""

from __future__ import annotations

import json

import pytest
import yaml

from ao_calib.config.compose import compose_run_config
from ao_calib.config.search import check_objective_name, check_search
from ao_calib.core.errors import AOCalibError
from ao_calib.task_api import build_task
from ao_calib_tasks.oracle.rows.oracle import activation_id
from tests.helpers.commands import assert_ok, run_cli
from tests.helpers.configs import composed
from tests.helpers.files import read_jsonl

pytest.importorskip("hydra_plugins.hydra_optuna_sweeper")  # the optuna extra: the search configs' sweeper

# oracle_tiny with a validation split, one GRPO step and no warm-up: a trial in seconds
TINY = ["experiment=oracle_tiny", "task.data.generate.n_validation_prompts=4", "warmup.enabled=false",
        "trainer.max_steps=1", "eval.initial=false", "eval.num_samples=4"]


def refusal(overrides: list[str]) -> str:
    cfg = composed(overrides)
    with pytest.raises(AOCalibError) as info:
        check_search(cfg, cfg.hydra)
    return str(info.value)


@pytest.mark.parametrize("overrides", [["experiment=quickstart", "hparams_search=oracle_optuna"],
                                       ["experiment=function_call_smollm2", "hparams_search=function_call_optuna"],
                                       ["experiment=quickstart"]])  # no search: nothing to check
def test_the_shipped_searches_pass_on_their_presets(overrides):
    cfg = composed(overrides)
    check_search(cfg, cfg.hydra)
    if "hparams_search=oracle_optuna" in overrides:  # a calibration figure, minimised
        assert cfg.search.objective == "brier" and cfg.hydra.sweeper.direction == "minimize"


@pytest.mark.parametrize("overrides, named", [
    (["task.data.eval_split=test"], "task.data.eval_split=test"),
    (["eval.enabled=false"], "eval.enabled=true"),
    (["eval.select_metric=brier", "eval.every_steps=1"], "eval.select_metric=brier"),
    (["search.objective=auroc"], "hydra.sweeper.direction=maximize"),  # AUROC is better higher
])
def test_a_search_that_would_not_optimise_a_validation_figure_is_refused(overrides, named):
    assert named in refusal(["experiment=quickstart", "hparams_search=oracle_optuna", *overrides])


def test_an_objective_the_task_does_not_report_is_refused_naming_those_it_does():
    task = build_task(compose_run_config(["experiment=oracle_tiny"]))
    check_objective_name("brier", task)
    with pytest.raises(AOCalibError, match="search.objective=nope") as info:
        check_objective_name("nope", task)
    assert "auroc" in str(info.value) and "ece" in str(info.value)


@pytest.mark.parametrize("sweep", [False, True], ids=["run", "multirun"])
def test_the_cli_refuses_a_search_on_the_test_split_before_any_run_directory(tmp_path, sweep):
    out = tmp_path / "out"
    where = ["-m", f"hydra.sweep.dir={out}"] if sweep else [f"hydra.run.dir={out}"]
    result = run_cli("ao_calib.run", *where, "experiment=function_call_smollm2", "hparams_search=function_call_optuna",
                     "task.data.eval_split=test")
    assert result.returncode == 2, result.stderr[-3000:]
    last = result.stderr.strip().splitlines()[-1]
    assert last.startswith("error: hparams_search=function_call_optuna") and "task.data.eval_split=test" in last
    assert not out.exists()


def test_a_search_returns_its_trials_objective_from_the_validation_split(tmp_path):
    sweep = tmp_path / "search"
    assert_ok(run_cli("ao_calib.run", "-m", *TINY, "hparams_search=oracle_optuna", "hydra.sweeper.n_trials=1",
                      f"hydra.sweep.dir={sweep}", "hydra.sweep.subdir=${hydra.job.num}"))  # overrides: a long name
    trials = sorted(p for p in sweep.iterdir() if (p / "summary.json").is_file())
    assert len(trials) == 1
    figures = json.loads((trials[0] / "eval.json").read_text())["metrics"]
    best = yaml.safe_load((sweep / "optimization_results.yaml").read_text())["best_value"]
    assert best == figures["brier"] != figures["accuracy"]  # the objective, not the accuracy
    validation = {activation_id(r["prompt"]) for r in build_task(compose_run_config(
        [*TINY, "task.data.eval_split=validation"])).source_rows().test}
    test = {activation_id(r["prompt"]) for r in build_task(compose_run_config(TINY)).source_rows().test}
    assert validation and test and validation.isdisjoint(test)
    scored = {row["source_id"] for row in read_jsonl(trials[0] / "eval_predictions.jsonl")}
    assert scored and scored <= validation
