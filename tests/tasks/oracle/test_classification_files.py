"""The shipped classification data (data/ao_classification), the Engels probes, ``load_labelled_file`` for every
paper format, and questions drawn from all paraphrases (tasks/oracle/classification/datasets.py). Malformed files are
written in tmp_path."""

from __future__ import annotations

import collections
import csv
import json
import shutil
import subprocess
from pathlib import Path

import pytest

from ao_calib.core import shipped
from ao_calib.core.errors import DataValidationError, MissingDataFileError
from ao_calib_tasks.oracle.classification.datasets import (
    ENGELS_DATASETS,
    ENGELS_PROBES,
    QUESTION_PREFIX,
    QUESTIONS,
    ClassificationDataUnavailable,
    detect_layout,
    load_classification,
    load_folder,
    load_labelled_file,
    load_paraphrases,
    load_suite,
    shipped_data_dir,
)

REPO = Path(__file__).resolve().parents[3]
SHIPPED = REPO / "data" / "ao_classification"
FIXTURES = REPO / "tests" / "fixtures" / "ao_classification"
PARAPHRASES = load_paraphrases(SHIPPED / "paraphrases" / "question.json")
ROW_FIELDS = {"dataset", "prompt", "question", "answer", "question_group"}


def row_fields(dataset: str) -> set[str]:
    """A row's fields: a statement of a dataset with classes also names them and its open question."""
    if dataset in ("ag_news", "ner"):
        return ROW_FIELDS
    subset = {"subset"} if dataset in ("geometry_of_truth", "relations") else set()
    return ROW_FIELDS | {"label", "asked", "fact", "open_question"} | subset


def strip_prefix(question: str) -> str:
    assert question.startswith(QUESTION_PREFIX)
    return question[len(QUESTION_PREFIX):]


def group_texts(question_group: str) -> list[str]:
    """The paraphrases a row's question_group names, e.g. 'engels/hist_fig_ismale/male' or 'tense'."""
    node = PARAPHRASES
    for key in question_group.split("/"):
        node = node[key]
    return node


def write_csv(path: Path, header: list[str], rows: list[list]) -> Path:
    with path.open("w", newline="", encoding="utf-8") as f:
        writer = csv.writer(f)
        writer.writerow(header)
        writer.writerows(rows)
    return path


# ------------------------------------------------------------------------------------------ the shipped data


def test_shipped_data_dir_is_the_clones_copy_and_tracked_by_git():
    assert shipped_data_dir() == SHIPPED
    assert (SHIPPED / "LICENSE").read_text().startswith("MIT License")
    assert len((SHIPPED / "SOURCE_COMMIT").read_text().strip()) == 40
    if shutil.which("git") is None or not (REPO / ".git").exists():
        pytest.skip("not a git checkout")
    # generated data under data/ stays ignored; the shipped folder is not
    ignored = subprocess.run(["git", "check-ignore", "-q", "data/ao_classification/gmt/cities.csv"], cwd=REPO)
    assert ignored.returncode == 1
    generated = subprocess.run(["git", "check-ignore", "-q", "data/tool_json/train.json"], cwd=REPO)
    assert generated.returncode == 0


def installed_at(monkeypatch, site: Path, with_data: bool) -> Path:
    """ao_calib as a non-editable install puts it in ``site`` (site-packages): its data/ inside the package (a link
    to the clone's) when ``with_data``, no clone beside it."""
    package = site / "ao_calib"
    package.mkdir(parents=True)
    if with_data:
        (package / "data").symlink_to(REPO / "data", target_is_directory=True)
    monkeypatch.setattr(shipped, "PACKAGE_DIR", package)
    monkeypatch.setattr(shipped, "CLONE_ROOT", site)
    return package


def test_shipped_data_dir_finds_the_installed_packages_copy(monkeypatch, tmp_path):
    package = installed_at(monkeypatch, tmp_path / "site-packages", with_data=True)
    assert shipped_data_dir() == package / "data" / "ao_classification"


def test_shipped_data_dir_missing_names_the_setting(monkeypatch, tmp_path):
    package = installed_at(monkeypatch, tmp_path / "site-packages", with_data=False)
    with pytest.raises(ClassificationDataUnavailable) as err:
        shipped_data_dir()
    message = str(err.value)
    assert "task.classification.data_dir" in message and "clone" in message
    assert str(package / "data" / "ao_classification") in message  # where the installed package's copy belongs
    with pytest.raises(ClassificationDataUnavailable, match="task.data.classification_dir"):
        shipped_data_dir("task.data.classification_dir")


def test_every_shipped_file_loads():
    rows = load_folder(SHIPPED, seed=0)
    by_dataset = collections.defaultdict(list)
    for row in rows:
        assert set(row) == row_fields(row["dataset"])
        assert row["answer"] in ("Yes", "No") and row["prompt"] == row["prompt"].strip() and row["prompt"]
        assert strip_prefix(row["question"])
        by_dataset[row["dataset"]].append(row)
    assert set(by_dataset) == {"geometry_of_truth", "relations", "tense", "singular_plural",
                               "engels_news_class_politics", "engels_headline_istrump",
                               "engels_wikidata_isjournalist", "engels_hist_fig_ismale"}
    data_rows = sum(1 for p in (SHIPPED / "gmt").glob("*.csv") for _ in csv.DictReader(p.open(newline="")))
    assert len(by_dataset["geometry_of_truth"]) == data_rows  # every statement, none dropped
    assert len(by_dataset["tense"]) == len(json.loads((SHIPPED / "tense" / "tense_processed.json").read_text()))
    for engels in (SHIPPED / "engels").glob("*.csv"):
        group = ENGELS_PROBES[engels.name][0]
        expected = sum(1 for _ in csv.DictReader(engels.open(newline="", encoding="utf-8")))
        got = by_dataset["engels_" + group]
        assert len(got) == expected
        counts = collections.Counter(r["answer"] for r in got)
        assert abs(counts["Yes"] - counts["No"]) <= 1
    assert load_folder(SHIPPED, seed=0) == rows  # deterministic


def test_default_questions_are_the_first_paraphrases_of_the_shipped_file():
    for name, default in QUESTIONS.items():
        group = PARAPHRASES[name]
        if isinstance(default, dict):
            assert {k: group[k][0] for k in default} == default, name
        else:
            assert group[0] == default, name


# ------------------------------------------------------------------------------------------- Engels probes


def test_shipped_engels_file_answers_follow_the_target():
    path = SHIPPED / "engels" / "5_hist_fig_ismale.csv"
    truth = {r["prompt"].strip(): r["target"] == "1" for r in csv.DictReader(path.open(newline="",
                                                                                       encoding="utf-8"))}
    rows = load_labelled_file(path, seed=0)
    assert {r["dataset"] for r in rows} == {"engels_hist_fig_ismale"}
    for row in rows:
        asked_male = row["question_group"] == "engels/hist_fig_ismale/male"
        assert row["question_group"] in ("engels/hist_fig_ismale/male", "engels/hist_fig_ismale/female")
        assert strip_prefix(row["question"]) == ("Is this person male?" if asked_male else "Is this person female?")
        assert (row["answer"] == "Yes") == (asked_male == truth[row["prompt"]])


def test_engels_file_with_true_false_targets_and_a_probe_named_by_question_json(tmp_path):
    # 7_headline_isobama.csv is not one of the reference's file names: its group is found in question.json
    path = write_csv(tmp_path / "7_headline_isobama.csv", ["prompt", "prompt_len", "target"],
                     [[f"Obama speaks at rally {i}.", 6, "True"] for i in range(5)]
                     + [[f"Markets fall on day {i}.", 6, "False"] for i in range(5)])
    rows = load_labelled_file(path, seed=1)
    assert len(rows) == 10 and collections.Counter(r["answer"] for r in rows) == {"Yes": 5, "No": 5}
    for row in rows:
        about_obama = row["prompt"].startswith("Obama")
        asked_obama = row["question_group"] == "engels/headline_isobama/obama"
        assert strip_prefix(row["question"]) in group_texts(row["question_group"])
        assert (row["answer"] == "Yes") == (about_obama == asked_obama)
        assert row["dataset"] == "engels_headline_isobama"


def test_engels_datasets_in_load_suite():
    rows, skipped = load_suite(ENGELS_DATASETS, SHIPPED, n=40, seed=0)
    assert set(rows) == {"engels_news_class_politics", "engels_headline_istrump", "engels_wikidata_isjournalist",
                         "engels_hist_fig_ismale"}
    assert set(skipped) == set(ENGELS_DATASETS) - set(rows)  # the six probes not shipped
    assert "engels/22_headline_isobama.csv" in skipped["engels_headline_isobama"]
    for name, dataset_rows in rows.items():
        assert len(dataset_rows) == 40 and collections.Counter(r["answer"] for r in dataset_rows) == {"Yes": 20,
                                                                                                      "No": 20}
    again, _ = load_suite(["engels_hist_fig_ismale"], SHIPPED, n=40, seed=0)
    assert again["engels_hist_fig_ismale"] == rows["engels_hist_fig_ismale"]


@pytest.mark.parametrize("rows, row, field, reason", [
    ([["A name", 2, "1"], ["Another", 2, "maybe"]], 1, "target", "maybe"),
    ([["A name", 2, "1"], ["  ", 2, "0"]], 1, "prompt", "non-empty"),
    ([["A name", "two", "1"]], 0, "prompt_len", "whole number"),
])
def test_malformed_engels_rows_name_file_row_and_field(tmp_path, rows, row, field, reason):
    path = write_csv(tmp_path / "5_hist_fig_ismale.csv", ["prompt", "prompt_len", "target"], rows)
    with pytest.raises(DataValidationError) as err:
        load_labelled_file(path)
    assert (err.value.source, err.value.row, err.value.field) == (str(path), row, field)
    assert reason in err.value.reason and f"5_hist_fig_ismale.csv: row {row}, field '{field}'" in str(err.value)


def test_engels_file_naming_no_probe_and_missing_target_column(tmp_path):
    unnamed = write_csv(tmp_path / "probe.csv", ["prompt", "target"], [["x", "1"]])
    with pytest.raises(DataValidationError) as err:
        load_labelled_file(unnamed)
    assert (err.value.source, err.value.row) == (str(unnamed), 0) and "<n>_<probe>.csv" in err.value.reason
    short = tmp_path / "5_hist_fig_ismale.csv"
    short.write_text("prompt,prompt_len,target\nA name,2,1\nB name,2\n")
    with pytest.raises(DataValidationError) as err:
        load_labelled_file(short)
    assert (err.value.row, err.value.field) == (1, "target")


# ---------------------------------------------------------------------------------- every paper format


@pytest.mark.parametrize("rel, layout", [
    ("gmt/cities.csv", "geometry_of_truth"),
    ("relations/linguistic/adj_antonym.json", "relations"),
    ("tense/tense_processed.json", "tense"),
    ("singular_plural/singular_plural.csv", "singular_plural"),
    ("ag_news/ag_news.csv", "ag_news"),
    ("ner/ner.csv", "ner"),
])
def test_paper_format_files_load(rel, layout):
    path = FIXTURES / rel
    assert detect_layout(path) == layout
    rows = load_labelled_file(path, seed=0)
    assert rows and all(set(r) == row_fields(layout) and r["dataset"] == layout for r in rows)
    assert rows == load_labelled_file(path, seed=0)
    for row in rows:  # the question comes from the dataset's group (first paraphrase by default)
        assert row["question_group"].split("/")[0] == layout


def test_gmt_and_relations_files_give_every_statement(tmp_path):
    gmt = load_labelled_file(FIXTURES / "gmt" / "cities.csv")
    truth = {r["statement"]: r["label"] == "1" for r in csv.DictReader((FIXTURES / "gmt" / "cities.csv").open())}
    assert sorted(r["prompt"] for r in gmt) == sorted(truth)
    assert all((r["answer"] == "Yes") == truth[r["prompt"]] for r in gmt)
    relation = json.loads((FIXTURES / "relations" / "linguistic" / "adj_antonym.json").read_text())
    rows = load_labelled_file(FIXTURES / "relations" / "linguistic" / "adj_antonym.json")
    yes = [r for r in rows if r["answer"] == "Yes"]
    assert len(yes) == len(relation["samples"])
    for sample in relation["samples"]:
        assert any(r["prompt"].endswith(f" {sample['object']}.") and sample["subject"] in r["prompt"] for r in yes)


def test_labelled_jsonl_rows(tmp_path):
    path = tmp_path / "probes.jsonl"
    path.write_text("\n".join(json.dumps(r) for r in [
        {"prompt": "The sky is green.", "question": "Is this true?", "answer": "no"},
        {"prompt": "Water is wet.", "question": "Is this true?", "answer": "Yes", "dataset": "facts", "kind": "x"},
    ]) + "\n")
    rows = load_labelled_file(path)
    assert [(r["dataset"], r["answer"], r["question_group"]) for r in rows] == [("probes", "No", "probes"),
                                                                                ("facts", "Yes", "facts")]
    assert rows[1]["kind"] == "x"  # extra fields kept
    path.write_text(json.dumps({"prompt": "p", "question": "q", "answer": "perhaps"}) + "\n")
    with pytest.raises(DataValidationError) as err:
        load_labelled_file(path)
    assert (err.value.source, err.value.row, err.value.field) == (str(path), 0, "answer")


@pytest.mark.parametrize("name, text, row, field", [
    ("cities.csv", "statement,label\nParis is in France.,1\nRome is in Peru.,2\n", 1, "label"),
    ("singular_plural.csv", "sentence,n_subjects\nThe twins swim.,several\n", 0, "n_subjects"),
    ("tense.json", json.dumps([{"sentence": "I ran.", "label": "past"}, {"label": "past"}]), 1, "sentence"),
    ("rel.json", json.dumps({"prompt_templates": ["{} is"], "samples": [{"subject": "a"}]}), 0, "object"),
    ("rel2.json", json.dumps({"samples": []}), 0, "prompt_templates"),
    ("odd.csv", "text,score\nhello,3\n", 0, None),
    ("odd.json", "3", 0, None),
    ("broken.json", "[{\"sentence\": ", 0, None),
    ("notes.txt", "hello", 0, None),
])
def test_malformed_paper_files_name_file_row_and_field(tmp_path, name, text, row, field):
    path = tmp_path / name
    path.write_text(text)
    with pytest.raises(DataValidationError) as err:
        load_labelled_file(path)
    assert (err.value.source, err.value.row, err.value.field) == (str(path), row, field)


def test_missing_file_is_refused(tmp_path):
    with pytest.raises(MissingDataFileError, match="nothing.csv"):
        load_labelled_file(tmp_path / "nothing.csv")
    with pytest.raises(MissingDataFileError, match="no_folder"):
        load_folder(tmp_path / "no_folder")


# -------------------------------------------------------------------------------------------- paraphrases


@pytest.mark.parametrize("name", ["geometry_of_truth", "relations", "tense", "singular_plural",
                                  "engels_hist_fig_ismale"])
def test_all_paraphrases_vary_questions_but_not_rows(name):
    first = load_classification(name, SHIPPED, n=120, seed=0)
    varied = load_classification(name, SHIPPED, n=120, seed=0, all_paraphrases=True)
    strip = [{k: v for k, v in r.items() if k != "question"} for r in first]
    # same prompts, answers and groups: only the question's wording changes
    assert strip == [{k: v for k, v in r.items() if k != "question"} for r in varied]
    assert len({r["question"] for r in varied}) > 2 * len({r["question"] for r in first})
    assert varied == load_classification(name, SHIPPED, n=120, seed=0, all_paraphrases=True)
    other_seed = load_classification(name, SHIPPED, n=120, seed=1, all_paraphrases=True)
    assert [r["question"] for r in other_seed] != [r["question"] for r in varied]
    for row in varied:
        texts = group_texts(row["question_group"])
        question = strip_prefix(row["question"])
        if name == "tense":  # the "{}" is filled with the tense asked about
            assert any(question == t.replace("{}", tense, 1) for t in texts for tense in ("past", "present",
                                                                                         "future"))
        else:
            assert question in texts


def test_all_paraphrases_in_labelled_files_and_hub_datasets():
    path = SHIPPED / "engels" / "21_headline_istrump.csv"
    rows = load_labelled_file(path, seed=0, all_paraphrases=True)
    assert len({r["question"] for r in rows}) == 10  # five paraphrases for each of the two classes
    assert rows == load_labelled_file(path, seed=0, all_paraphrases=True)
    data = {"train": {"premise": [f"P{i}" for i in range(40)], "hypothesis": [f"H{i}" for i in range(40)],
                      "label": [0, 2] * 20}}
    snli = load_classification("snli", None, n=40, all_paraphrases=True, hub_loader=lambda hub_id, config: data)
    assert len({strip_prefix(r["question"]).rsplit(" ", 1)[0] for r in snli}) > 3
    assert all(strip_prefix(r["question"]).rsplit(" ", 1)[0] in PARAPHRASES["snli"] for r in snli)


def test_malformed_or_missing_paraphrase_file(tmp_path):
    data_dir = tmp_path / "data"
    shutil.copytree(FIXTURES, data_dir)
    with pytest.raises(MissingDataFileError, match="question.json"):
        load_classification("tense", data_dir, n=4, all_paraphrases=True)
    (data_dir / "paraphrases").mkdir()
    question_file = data_dir / "paraphrases" / "question.json"
    paraphrases = json.loads((SHIPPED / "paraphrases" / "question.json").read_text())
    paraphrases["tense"][2] = "Is this statement in the past tense?"  # no "{}" for the tense asked
    question_file.write_text(json.dumps(paraphrases))
    with pytest.raises(DataValidationError) as err:
        load_classification("tense", data_dir, n=4, all_paraphrases=True)
    assert (err.value.source, err.value.row, err.value.field) == (str(question_file), 2, "tense")
    del paraphrases["engels"]["hist_fig_ismale"]["female"]
    question_file.write_text(json.dumps(paraphrases))
    (data_dir / "engels").mkdir()
    write_csv(data_dir / "engels" / "5_hist_fig_ismale.csv", ["prompt", "prompt_len", "target"], [["A", 1, "1"]])
    with pytest.raises(DataValidationError) as err:
        load_classification("engels_hist_fig_ismale", data_dir, n=4)
    assert err.value.field == "engels/hist_fig_ismale/female"
