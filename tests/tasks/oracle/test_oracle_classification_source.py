"""task.data.classification: the Activation Oracle paper's classification statements as an oracle run's rows, every
confidence method of task.baselines_suite in every row, per-dataset figures, and paper-format held-out files."""

from __future__ import annotations

import csv
import json
from collections import Counter

import pytest

from ao_calib import eval as eval_command
from ao_calib.calibration.per_dataset import dataset_figures
from ao_calib.config.compose import compose_run_config
from ao_calib.core.errors import DataValidationError
from ao_calib.core.io import json_safe
from ao_calib.task_api import build_task
from ao_calib_tasks.oracle.classification.datasets import is_engels
from tests.helpers.commands import assert_ok, run_cli
from tests.helpers.files import read_jsonl

CAPS = {"n_train": 8, "n_validation": 6, "n_test": 4, "n_ood": 4}
SOURCE = ["task.data.classification.enabled=true", *(f"task.data.classification.{k}={v}" for k, v in CAPS.items())]
SUITE = ("logprob", "mode", "warmup", "text_rule", "probe")  # logprob_platt too where the Platt fit was possible
ANSWERING = ("mode", "warmup", "probe")
OPEN_SUITE = ("warmup", "text_rule")  # what an open question's row carries


def test_the_classification_source_gives_the_task_disjoint_capped_splits_with_their_dataset():
    task = build_task(compose_run_config(["experiment=oracle_tiny", *SOURCE]))
    source = task.source_rows()
    train, test = source.train, source.test
    splits = {"train": train, "validation": source.validation, "test": test}
    prompts = {name: {r["prompt"] for r in rows} for name, rows in splits.items()}
    assert not prompts["train"] & prompts["validation"] and not prompts["train"] & prompts["test"]
    assert not prompts["validation"] & prompts["test"]
    in_distribution = {"geometry_of_truth", "relations", "tense", "singular_plural"}
    for name, rows in splits.items():
        counts = Counter(r["dataset"] for r in rows if r.get("question_form") != "open")  # the caps count yes/no rows
        assert all(r["in_distribution"] == (not is_engels(r["dataset"])) and r["kind"] == r["dataset"] for r in rows)
        assert {d for d in counts if not is_engels(d)} == in_distribution, name
        cap = CAPS[f"n_{name}"]
        assert all(0 < n <= (cap if not is_engels(d) else CAPS["n_ood"]) for d, n in counts.items()), (name, counts)
        # each held-out statement is also asked its open question, answered by its class; training rows carry it
        opened = [r for r in rows if r.get("question_form") == "open"]
        assert sorted(r["prompt"] for r in opened) == sorted({r["prompt"] for r in rows if name != "train"})
        assert all(r["answer"] == r["fact"] and r["question"] == r["open_question"] for r in opened)
        assert all(r["fact"] and r["open_question"] for r in rows)
    assert {d for d in Counter(r["dataset"] for r in test) if is_engels(d)} == {
        "engels_headline_istrump", "engels_hist_fig_ismale", "engels_news_class_politics",
        "engels_wikidata_isjournalist"}
    assert not any(is_engels(r["dataset"]) for r in train + source.validation)
    # every in-distribution question is asked in one of its paraphrases, not always the first, each wording with
    # as many Yes as No rows in every split
    assert len({r["question"] for r in train if r["dataset"] in ("geometry_of_truth", "relations")}) > 3
    for rows in (train, source.validation, test):
        answers = Counter((r["dataset"], r["question"], r["answer"]) for r in rows if r["answer"] in ("Yes", "No"))
        assert all(answers[d, q, "Yes"] == answers[d, q, "No"] for d, q, _ in answers)


def test_bad_classification_settings_are_refused_naming_the_key():
    with pytest.raises(Exception, match="fractions"):
        build_task(compose_run_config(["experiment=oracle_tiny", *SOURCE,
                                       "task.data.classification.fractions=[0.5,0.5,0.5]"]))
    with pytest.raises(Exception, match="task.data.classification.datasets"):
        build_task(compose_run_config(["experiment=oracle_tiny", *SOURCE,
                                       "task.data.classification.datasets=[no_such_set]"])).source_rows()


@pytest.fixture(scope="module")
def classification_run(tmp_path_factory):
    """A tiny run scoring every test row; one step per stage and no evaluation before training (no test reads one):
    the warm-up's evaluation and the final one are what the tests check."""
    out = tmp_path_factory.mktemp("classification") / "run"
    result = run_cli("ao_calib.run", "experiment=oracle_tiny", *SOURCE, "task.baselines_suite=true",
                     "task.activations.center=true", "eval.num_samples=null", "eval.initial=false",
                     "warmup.max_steps=1", "trainer.max_steps=1", f"hydra.run.dir={out}")
    assert_ok(result)
    return out, result.stdout


def test_every_own_row_carries_every_baseline_and_the_figures_are_those_of_the_rows(classification_run):
    out, stdout = classification_run
    final = json.loads((out / "eval.json").read_text())
    own = read_jsonl(out / "eval_predictions.jsonl")
    rows = own + read_jsonl(out / "eval_predictions_control.jsonl") + read_jsonl(out / "eval_predictions_none.jsonl")
    expected = set(SUITE) | ({"logprob_platt"} if "logprob_platt" in final["baselines"] else set())
    from ao_calib.config.compose import load_run_config

    assert len(own) == len(build_task(load_run_config(out / "config.yaml")).source_rows().test)  # every test row
    for row in own:  # an open question (answered by a class) has no yes/no probability, mode or probe
        opened = row.get("question_form") == "open"
        assert set(row["baselines"]) == (expected & set(OPEN_SUITE) if opened else expected)
        assert all(0 <= v <= 1 for v in row["baselines"].values())
        assert set(row["baseline_correct"]) == (set(ANSWERING) & set(OPEN_SUITE) if opened else set(ANSWERING))
    assert {r.get("question_form") for r in own} == {None, "open"}
    assert all(isinstance(r["dataset"], str) and r["in_distribution"] == (not is_engels(r["dataset"])) for r in rows)
    assert {"mode", "warmup", "text_rule", "probe"} <= final["baselines"].keys()
    # eval.json's per-dataset figures are those the written rows give
    assert json.dumps(final["per_dataset"], sort_keys=True) == json.dumps(json_safe(dataset_figures(rows)),
                                                                         sort_keys=True)
    assert final["per_dataset"]["ood_datasets"] and "in_distribution" in final["per_dataset"]["pooled"]
    # the warm-up's number is the one its own evaluation stated on the same row
    warm = {(r["source_id"], r["question"]): r for r in read_jsonl(out / "eval_predictions_warmup.jsonl")}
    for row in own:
        stated = warm[(row["source_id"], row["question"])]["scores"]
        assert row["baselines"]["warmup"] == (0.5 if stated["confidence"] is None else stated["confidence"])
        assert row["baseline_correct"]["warmup"] == stated["correct"]
    closing = stdout[stdout.rindex("=" * 72, 0, stdout.rindex("=" * 72)):]
    # the closing block: where it reads, per dataset; every method's figures in the evaluation's own output
    assert "per dataset (final evaluation" in closing and "| pooled OOD | " in closing
    assert "| tense | " in closing.split("per dataset (final evaluation")[1]
    assert "| pooled OOD (4 sets) | probe |" in stdout
    for group in ("in_distribution", "out_of_distribution"):
        assert (out / f"reliability_final_{group}.png").read_bytes()[:4] == b"\x89PNG"


def test_an_engels_file_is_scored_through_test_path_with_its_dataset(classification_run, tmp_path, caplog):
    """Scored with the baselines of the run's own final evaluation; a statement of the validation split in the file
    is left out of the Platt fit."""
    from ao_calib.config.compose import load_run_config

    out, _ = classification_run
    task = build_task(load_run_config(out / "config.yaml"))
    validation = task.source_rows().validation
    validation_statement = validation[0]["prompt"]
    engels = tmp_path / "5_hist_fig_ismale.csv"
    with engels.open("w", newline="") as f:
        csv.writer(f).writerows([("prompt", "prompt_len", "target"), ("Marie Curie", 3, 0), ("Isaac Newton", 3, 1),
                                 ("Ada Lovelace", 3, 0), ("Alan Turing", 3, 1), (validation_statement, 9, 1)])
    with caplog.at_level("WARNING"):
        assert eval_command.main([f"run_dir={out}", "tag=engels", f"task.data.test_path={engels}"]) == 0
    scored = read_jsonl(out / "eval_predictions_engels.jsonl")
    assert len(scored) == 5 and {r["dataset"] for r in scored} == {"engels_hist_fig_ismale"}
    assert not any(r["in_distribution"] for r in scored)
    assert len(read_jsonl(out / "eval_predictions_engels_control.jsonl")) == 5
    report = json.loads((out / "eval_engels.json").read_text())
    assert report["per_dataset"]["ood_datasets"] == ["engels_hist_fig_ismale"]
    assert {"mode", "text_rule", "probe"} <= report["baselines"].keys()
    assert all({"mode", "text_rule", "probe"} <= r["baselines"].keys() for r in scored)
    yes_no = [r for r in validation if r["answer"] in ("Yes", "No")]  # the Platt fit's rows
    assert f"1 of the {len(yes_no)} validation rows are among the rows scored" in caplog.text
    if "logprob_platt" in report["baselines"]:  # fitted unless every validation answer was right (or wrong)
        assert report["baselines"]["logprob_platt"]["validation_rows_scored_too"] == 1
    # a malformed file is refused before any model loads, naming the file and the field
    (tmp_path / "bad").mkdir()
    bad = tmp_path / "bad" / "5_hist_fig_ismale.csv"
    bad.write_text("prompt,prompt_len,target\nMarie Curie,3,maybe\n")
    cfg = compose_run_config(["experiment=oracle_tiny", *SOURCE, f"task.data.test_path={bad}"])
    with pytest.raises(DataValidationError, match=r"bad/5_hist_fig_ismale.csv.*target"):
        build_task(cfg)


def test_the_preset_composes():
    result = run_cli("ao_calib.run", "experiment=oracle_smollm2_classification", "--cfg", "job")
    assert_ok(result)
    assert "baselines_suite: true" in result.stdout
    task = build_task(compose_run_config(["experiment=oracle_smollm2_classification"]))
    assert task.config.data.classification.enabled and task.config.baselines_suite
