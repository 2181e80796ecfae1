"""Classification evaluation sets (tasks/oracle/classification/datasets.py), on tiny hand-written fixtures in the real
formats (tests/fixtures/ao_classification). One test reads slices of the real reference files
(tests/fixtures/ao_classification_real)."""

from __future__ import annotations

import collections
import json
import shutil
import socket
from pathlib import Path

import pytest

from ao_calib.core.errors import AOCalibError, DataValidationError
from ao_calib_tasks.oracle.classification.datasets import (
    DATASETS,
    FILE_DATASETS,
    HUB_DATASETS,
    QUESTION_PREFIX,
    ClassificationDataUnavailable,
    load_classification,
    load_suite,
)
from ao_calib_tasks.oracle.classification.files import ner_sentences

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "ao_classification"
# Slices of the real reference files (adamkarvonen/activation_oracles, MIT): see that folder's README.md.
REAL_DATA = Path(__file__).resolve().parents[2] / "fixtures" / "ao_classification_real"


@pytest.fixture
def data_dir(tmp_path) -> Path:
    """A writable copy of the fixtures, for tests that corrupt or delete files."""
    target = tmp_path / "ao_classification"
    shutil.copytree(FIXTURES, target)
    return target


def answers(rows):
    return collections.Counter(r["answer"] for r in rows)


def strip_prefix(question: str) -> str:
    assert question.startswith(QUESTION_PREFIX)
    return question[len(QUESTION_PREFIX):]


# ----------------------------------------------------------------------------------------------- the basics


def test_dataset_lists():
    assert DATASETS == ("geometry_of_truth", "relations", "sst2", "md_gender", "snli", "ag_news", "ner", "tense",
                        "singular_plural")
    assert set(FILE_DATASETS) | set(HUB_DATASETS) == set(DATASETS)
    assert not set(FILE_DATASETS) & set(HUB_DATASETS)
    assert issubclass(ClassificationDataUnavailable, AOCalibError)


@pytest.mark.parametrize("name", FILE_DATASETS)
def test_file_rows_shape_prefix_and_balance(name):
    rows = load_classification(name, FIXTURES, n=10, seed=0)
    assert len(rows) == (5 if name == "ner" else 10)  # the ner fixture has only 5 sentences with entities
    for row in rows:
        assert {"dataset", "prompt", "question", "answer", "question_group"} <= set(row)
        assert row["dataset"] == name and row["question_group"].split("/")[0] == name
        assert row["question"].startswith("Answer with 'Yes' or 'No' only. ")
        assert row["answer"] in ("Yes", "No")
        assert row["prompt"] and row["prompt"] == row["prompt"].strip()
    counts = answers(rows)
    assert abs(counts["Yes"] - counts["No"]) <= 1


@pytest.mark.parametrize("name", FILE_DATASETS)
def test_deterministic_for_a_seed(name):
    a = load_classification(name, FIXTURES, n=8, seed=3)
    b = load_classification(name, FIXTURES, n=8, seed=3)
    assert a == b
    others = [load_classification(name, FIXTURES, n=8, seed=s) for s in range(4, 9)]
    assert any(o != a for o in others)


def test_suite_rows_do_not_depend_on_the_other_datasets():
    alone, _ = load_suite(["tense"], FIXTURES, n=6, seed=1)
    together, _ = load_suite(["relations", "tense", "geometry_of_truth"], FIXTURES, n=6, seed=1)
    assert alone["tense"] == together["tense"]


def test_n_caps_rows_and_small_files_return_what_they_have():
    assert len(load_classification("tense", FIXTURES, n=7)) == 7
    assert load_classification("tense", FIXTURES, n=0) == []
    everything = load_classification("tense", FIXTURES, n=1000)
    assert len(everything) == 24  # 8 sentences per tense in the fixture, each used once
    assert len({r["prompt"] for r in everything}) == 24
    assert answers(everything) == {"Yes": 12, "No": 12}
    with pytest.raises(ValueError):
        load_classification("tense", FIXTURES, n=-1)


def test_unknown_dataset_name():
    with pytest.raises(AOCalibError, match="unknown classification dataset"):
        load_classification("imdb", FIXTURES)
    with pytest.raises(AOCalibError, match="unknown classification dataset"):
        load_suite(["tense", "imdb"], FIXTURES)


# ------------------------------------------------------------------------------------- per-dataset labels


def test_geometry_of_truth_labels_and_subfile_spread():
    rows = load_classification("geometry_of_truth", FIXTURES, n=1000)
    assert len(rows) == 32 and answers(rows) == {"Yes": 16, "No": 16}
    by_prompt = {r["prompt"]: r for r in rows}
    assert by_prompt["The city of Lyon is in France."]["answer"] == "Yes"
    assert by_prompt["The city of Lyon is in Peru."]["answer"] == "No"
    assert by_prompt["Acme Bakeries, a fictional firm, sells bread."]["answer"] == "Yes"  # quoted comma
    assert by_prompt["Sixty is larger than seventy."]["answer"] == "No"
    assert {strip_prefix(r["question"]) for r in rows} == {"Is this statement true?"}
    # n=10 draws round-robin over the five gmt files: each contributes 1 Yes and 1 No.
    small = load_classification("geometry_of_truth", FIXTURES, n=10, seed=5)
    cities = [r for r in small if r["prompt"].startswith("The city of")]
    assert answers(cities) == {"Yes": 1, "No": 1}


def test_relations_statements_and_wrong_objects():
    rows = load_classification("relations", FIXTURES, n=1000)
    assert answers(rows) == {"Yes": 13, "No": 13}
    yes = {r["prompt"] for r in rows if r["answer"] == "Yes"}
    no = [r["prompt"] for r in rows if r["answer"] == "No"]
    assert "The opposite of hot is cold." in yes
    assert yes & {"The capital city of France is Paris.", "The capital of France is Paris."}
    assert {strip_prefix(r["question"]) for r in rows} == {"Is this statement true?"}
    capitals = {"France": "Paris", "Japan": "Tokyo", "Kenya": "Nairobi", "Peru": "Lima", "Norway": "Oslo",
                "Egypt": "Cairo"}
    for prompt in no:
        assert prompt not in yes and prompt.endswith(".")
        for country, capital in capitals.items():
            if f" {country} is " in prompt:
                wrong = prompt.rsplit(" ", 1)[1].rstrip(".")
                assert wrong != capital and wrong in capitals.values()
    # "little" is both "big" and "large" in the fixture: neither may be its wrong object.
    assert not [p for p in no if p in ("The opposite of little is big.", "The opposite of little is large.")]


def test_tense_questions_match_labels():
    fixture = json.loads((FIXTURES / "tense" / "tense_processed.json").read_text())
    truth = {x["sentence"]: x["label"] for x in fixture}
    rows = load_classification("tense", FIXTURES, n=1000, seed=2)
    for row in rows:
        question = strip_prefix(row["question"])
        asked = question.removeprefix("Is this statement in the ").removesuffix(" tense?")
        assert asked in ("past", "present", "future")
        assert (row["answer"] == "Yes") == (asked == truth[row["prompt"]])
    walked = next(r for r in rows if r["prompt"] == "She walked to the market yesterday.")  # past
    assert (walked["answer"] == "Yes") == walked["question"].endswith("in the past tense?")
    # Contexts are spread evenly over the three tenses.
    spread = collections.Counter(truth[r["prompt"]] for r in load_classification("tense", FIXTURES, n=9))
    assert spread == {"past": 3, "present": 3, "future": 3}


def test_singular_plural_questions_match_labels():
    single = "Would you say this sentence mentions a single person?"
    multiple = "Would you say this sentence mentions multiple people?"
    rows = load_classification("singular_plural", FIXTURES, n=1000)
    assert answers(rows) == {"Yes": 6, "No": 6}
    by_prompt = {r["prompt"]: r for r in rows}
    maria = by_prompt["Maria is a nurse."]  # single
    assert (maria["answer"] == "Yes") == (strip_prefix(maria["question"]) == single)
    twins = by_prompt["The twins are learning to swim."]  # multiple
    assert (twins["answer"] == "Yes") == (strip_prefix(twins["question"]) == multiple)
    assert by_prompt["Sam, Ana and Joe share a flat."]  # quoted comma kept
    assert {strip_prefix(r["question"]) for r in rows} == {single, multiple}


def test_ag_news_context_and_topics():
    rows = load_classification("ag_news", FIXTURES, n=1000)
    assert answers(rows) == {"Yes": 6, "No": 6}
    topics = {"World News", "Sports", "Business", "Science/Technology"}
    truth = {"Local club wins the cup": "Sports", "Bank raises interest rates": "Business",
             "Probe lands on distant moon": "Science/Technology", "Election results announced": "World News"}
    for row in rows:
        title, description = row["prompt"].split("\n\n")
        assert title and description
        question = strip_prefix(row["question"])
        topic = question.removeprefix("Would you say this piece focuses on ").removesuffix("?")
        assert topic in topics
        if title in truth:
            assert (row["answer"] == "Yes") == (topic == truth[title])


def test_ner_entities_and_latin1_fallback():
    sentences = dict(ner_sentences(FIXTURES / "ner" / "ner.csv"))
    assert sentences["Alice Walker visited Paris ."] == ["Alice Walker", "Paris"]
    assert sentences["The United Nations met in Geneva on Monday ."] == ["United Nations", "Geneva", "Monday"]
    assert sentences["Zo\u00eb moved to Lisbon ."] == ["Zo\u00eb", "Lisbon"]  # latin-1 byte decoded
    assert sentences["Google opened an office in Nairobi"] == ["Google", "Nairobi"]  # entity ends the sentence
    assert sentences["Kenya Japan and Peru signed a treaty ."] == ["Kenya", "Japan", "Peru"]  # B-geo B-geo
    assert sentences["It rained all day ."] == []

    rows = load_classification("ner", FIXTURES, n=1000)
    assert len(rows) == 5  # "It rained all day ." has no entity and is left out
    counts = answers(rows)
    assert abs(counts["Yes"] - counts["No"]) <= 1
    for row in rows:
        entity = strip_prefix(row["question"]).removeprefix("Does this text mention ").removesuffix("?")
        assert (row["answer"] == "Yes") == (entity in sentences[row["prompt"]])
        if row["answer"] == "No":
            assert entity.lower() not in row["prompt"].lower()


# ------------------------------------------------------------------------------ missing and malformed files


@pytest.mark.parametrize("name, rel", [
    ("geometry_of_truth", "gmt/larger_than.csv"),
    ("tense", "tense/tense_processed.json"),
    ("singular_plural", "singular_plural/singular_plural.csv"),
    ("ag_news", "ag_news/ag_news.csv"),
    ("ner", "ner/ner.csv"),
])
def test_missing_file_is_unavailable_and_names_the_path(data_dir, name, rel):
    (data_dir / rel).unlink()
    with pytest.raises(ClassificationDataUnavailable) as err:
        load_classification(name, data_dir)
    assert name in str(err.value) and str(data_dir / rel) in str(err.value)


def test_missing_relations_dir_and_no_data_dir(data_dir, tmp_path):
    shutil.rmtree(data_dir / "relations")
    with pytest.raises(ClassificationDataUnavailable, match="relations"):
        load_classification("relations", data_dir)
    with pytest.raises(ClassificationDataUnavailable, match="data_dir"):
        load_classification("tense", None)


def test_suite_skips_missing_files_with_reasons(data_dir):
    (data_dir / "ner" / "ner.csv").unlink()
    rows, skipped = load_suite(FILE_DATASETS, data_dir, n=4, seed=0)
    assert set(skipped) == {"ner"} and "ner.csv" in skipped["ner"]
    assert set(rows) == set(FILE_DATASETS) - {"ner"}
    assert all(len(v) == 4 for v in rows.values())


def _rewrite(path: Path, old: str, new: str) -> None:
    text = path.read_text()
    assert old in text
    path.write_text(text.replace(old, new, 1))


def test_malformed_gmt_label_names_file_row_and_field(data_dir):
    path = data_dir / "gmt" / "cities.csv"
    _rewrite(path, "The city of Osaka is in Japan.,1,", "The city of Osaka is in Japan.,true,")
    with pytest.raises(DataValidationError) as err:
        load_classification("geometry_of_truth", data_dir)
    assert (err.value.source, err.value.row, err.value.field) == (str(path), 2, "label")
    assert "cities.csv: row 2, field 'label'" in str(err.value)


def test_malformed_csv_missing_column_and_short_row(data_dir):
    path = data_dir / "singular_plural" / "singular_plural.csv"
    _rewrite(path, "sentence,n_subjects", "sentence,subjects")
    with pytest.raises(DataValidationError) as err:
        load_classification("singular_plural", data_dir)
    assert (err.value.row, err.value.field) == (0, "n_subjects") and "missing column" in err.value.reason

    path.write_text("sentence,n_subjects\nMaria is a nurse.,single\nThe twins swim.\n")
    with pytest.raises(DataValidationError) as err:
        load_classification("singular_plural", data_dir)
    assert (err.value.row, err.value.field) == (1, "n_subjects")

    path.write_text("sentence,n_subjects\nMaria is a nurse.,single\nThe twins swim.,several\n")
    with pytest.raises(DataValidationError) as err:
        load_classification("singular_plural", data_dir)
    assert (err.value.row, err.value.field) == (1, "n_subjects") and "several" in err.value.reason


def test_malformed_json_rows(data_dir):
    tense = data_dir / "tense" / "tense_processed.json"
    rows = json.loads(tense.read_text())
    rows[4]["label"] = "pluperfect"
    tense.write_text(json.dumps(rows))
    with pytest.raises(DataValidationError) as err:
        load_classification("tense", data_dir)
    assert (err.value.source, err.value.row, err.value.field) == (str(tense), 4, "label")

    del rows[4]["sentence"]
    rows[4]["label"] = "past"
    tense.write_text(json.dumps(rows))
    with pytest.raises(DataValidationError) as err:
        load_classification("tense", data_dir)
    assert (err.value.row, err.value.field) == (4, "sentence")

    tense.write_text("[{\"sentence\": \"x\", ")
    with pytest.raises(DataValidationError, match="not valid JSON"):
        load_classification("tense", data_dir)

    relation = data_dir / "relations" / "linguistic" / "adj_antonym.json"
    data = json.loads(relation.read_text())
    data["samples"][3] = {"subject": "fast"}
    relation.write_text(json.dumps(data))
    with pytest.raises(DataValidationError) as err:
        load_classification("relations", data_dir)
    assert (err.value.source, err.value.row, err.value.field) == (str(relation), 3, "object")

    del data["samples"]
    relation.write_text(json.dumps(data))
    with pytest.raises(DataValidationError) as err:
        load_classification("relations", data_dir)
    assert err.value.field == "samples"


def test_malformed_ner_and_ag_news_rows(data_dir):
    ner = data_dir / "ner" / "ner.csv"
    ner.write_bytes(ner.read_bytes().replace(b",visited,VBD,O", b",visited,VBD,X-per", 1))
    with pytest.raises(DataValidationError) as err:
        load_classification("ner", data_dir)
    assert (err.value.row, err.value.field) == (2, "Tag")

    ag = data_dir / "ag_news" / "ag_news.csv"
    _rewrite(ag, '"2","Tennis star reaches final"', '"5","Tennis star reaches final"')
    with pytest.raises(DataValidationError) as err:
        load_classification("ag_news", data_dir)
    assert (err.value.row, err.value.field) == (4, "Class Index")


def test_malformed_file_is_raised_by_load_suite_not_skipped(data_dir):
    _rewrite(data_dir / "gmt" / "sp_en_trans.csv", "'dog'.,1", "'dog'.,")
    with pytest.raises(DataValidationError):
        load_suite(["tense", "geometry_of_truth"], data_dir)


# ------------------------------------------------------------------------------------------- hub datasets


def test_hub_datasets_offline_are_skipped_without_network(monkeypatch, tmp_path):
    """Offline, the three hub datasets are skipped with a reason, without a single name lookup (so without
    network retries)."""
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")
    import datasets.config

    # datasets reads these at import time, which may have happened before this test: patch them too, and point
    # the caches at an empty folder so that a warm cache on this machine cannot make a dataset load.
    monkeypatch.setattr(datasets.config, "HF_HUB_OFFLINE", True)
    monkeypatch.setattr(datasets.config, "HF_DATASETS_CACHE", str(tmp_path / "datasets_cache"))
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf_home"))
    try:
        import huggingface_hub.constants as hub_constants
        monkeypatch.setattr(hub_constants, "HF_HUB_OFFLINE", True)
        monkeypatch.setattr(hub_constants, "HF_HUB_CACHE", str(tmp_path / "hub_cache"))
    except ImportError:  # pragma: no cover
        pass

    lookups = []

    def refuse_lookup(*args, **kwargs):
        lookups.append(args[:2])
        raise socket.gaierror(socket.EAI_NONAME, "name lookups are refused in this test")

    monkeypatch.setattr(socket, "getaddrinfo", refuse_lookup)
    monkeypatch.setattr(socket, "gethostbyname", refuse_lookup)
    rows, skipped = load_suite(["sst2", "tense", "md_gender", "snli"], FIXTURES, n=4)
    assert lookups == []  # offline means no network at all, so no retries against it either
    assert list(rows) == ["tense"]
    assert set(skipped) == {"sst2", "md_gender", "snli"}
    assert "stanfordnlp/sst2" in skipped["sst2"] and "offline?" in skipped["sst2"]
    assert "facebook/md_gender_bias" in skipped["md_gender"]
    assert "stanfordnlp/snli" in skipped["snli"]


def test_default_hub_loader_honours_offline_env_set_after_import(monkeypatch):
    import datasets.config

    monkeypatch.setattr(datasets.config, "HF_HUB_OFFLINE", False)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    seen = {}

    def fake_load_dataset(*args, **kwargs):
        seen["offline"] = datasets.config.HF_HUB_OFFLINE
        raise ConnectionError("no network")

    monkeypatch.setattr(datasets, "load_dataset", fake_load_dataset)
    with pytest.raises(ClassificationDataUnavailable, match="stanfordnlp/snli could not be loaded"):
        load_classification("snli", None)
    assert seen["offline"] is True and datasets.config.HF_HUB_OFFLINE is False


def _fake_hub():
    """Column-oriented stand-ins for the hub datasets, the shape hub_loader may return."""
    sst2 = {
        "train": {"sentence": [f" a wonderful film number {i} " for i in range(6)]
                  + [f"a dreadful film number {i}" for i in range(6)],
                  "label": [1] * 6 + [0] * 6, "idx": list(range(12))},
        "validation": {"sentence": ["a fine film", "a poor film"], "label": [1, 0], "idx": [0, 1]},
        "test": {"sentence": ["unlabelled"], "label": [-1], "idx": [0]},
    }
    md_gender = {
        split: {"text": [f"{split} person {i} wrote books." for i in range(9)],
                "title": [f"Person {split} {i}" for i in range(9)],
                "persona": ["Humorous"] * 9,
                "gender": [0, 1, 2, 1, 2, 0, 2, 2, 2]}
        for split in ("train", "validation", "test")
    }
    snli = {"train": {"premise": [f"A dog runs in park {i}." for i in range(12)],
                      "hypothesis": [f"hypothesis {i}" for i in range(12)],
                      "label": [0, 1, 2, -1] * 3}}
    return {"stanfordnlp/sst2": sst2, "facebook/md_gender_bias": md_gender, "stanfordnlp/snli": snli}


def _fake_loader(calls):
    hub = _fake_hub()

    def loader(hub_id, config):
        calls.append((hub_id, config))
        return hub[hub_id]

    return loader


def test_hub_datasets_with_a_stand_in_loader():
    calls = []
    rows, skipped = load_suite(HUB_DATASETS, None, n=8, seed=0, hub_loader=_fake_loader(calls))
    assert skipped == {}
    assert calls == [("stanfordnlp/sst2", None), ("facebook/md_gender_bias", "funpedia"), ("stanfordnlp/snli", None)]

    sst2 = rows["sst2"]
    assert len(sst2) == 8 and answers(sst2) == {"Yes": 4, "No": 4}
    for row in sst2:
        assert row["prompt"] == row["prompt"].strip() and row["prompt"] != "unlabelled"
        positive = "wonderful" in row["prompt"] or "fine" in row["prompt"]
        asked_positive = strip_prefix(row["question"]) == "Is this a positive review?"
        assert strip_prefix(row["question"]) in ("Is this a positive review?", "Is this a negative review?")
        assert (row["answer"] == "Yes") == (positive == asked_positive)

    md = rows["md_gender"]
    assert len(md) == 8 and answers(md) == {"Yes": 4, "No": 4}
    fake = _fake_hub()["facebook/md_gender_bias"]
    gender_of = {t: {1: "female", 2: "male"}.get(g) for s in fake.values() for t, g in zip(s["text"], s["gender"])}
    for row in md:
        text, about = row["prompt"].split("\n\n")
        assert about.startswith("This text is about Person ")
        truth = gender_of[text]
        assert truth in ("female", "male")  # neutral (0) rows are dropped
        asked = strip_prefix(row["question"]).removeprefix("Is this sentence about a ").removesuffix(" person?")
        assert (row["answer"] == "Yes") == (asked == truth)

    snli = rows["snli"]
    assert len(snli) == 6 and answers(snli) == {"Yes": 3, "No": 3}  # 3 entailment + 3 contradiction in the fake
    for row in snli:
        question = strip_prefix(row["question"])
        assert question.startswith("Is the next sentence logically consistent with what came before? hypothesis ")
        label = [0, 1, 2, -1][int(question.rsplit(" ", 1)[1]) % 4]
        assert label in (0, 2) and (row["answer"] == "Yes") == (label == 0)


def test_hub_rows_from_a_real_datasets_object_and_missing_columns():
    import datasets

    data = datasets.DatasetDict({
        "train": datasets.Dataset.from_dict({"premise": ["P0", "P1", "P2", "P3"],
                                             "hypothesis": ["H0", "H1", "H2", "H3"], "label": [0, 2, 1, 0]}),
    })
    rows = load_classification("snli", None, n=10, hub_loader=lambda hub_id, config: data)
    assert sorted((r["prompt"], r["answer"]) for r in rows) == [("P0", "Yes"), ("P1", "No"), ("P3", "Yes")]
    assert rows == load_classification("snli", None, n=10, hub_loader=lambda hub_id, config: data)

    broken = datasets.DatasetDict({"train": datasets.Dataset.from_dict({"premise": ["P"], "label": [0]})})
    with pytest.raises(DataValidationError) as err:
        load_classification("snli", None, hub_loader=lambda hub_id, config: broken)
    assert err.value.field == "hypothesis" and "stanfordnlp/snli" in err.value.source


# ----------------------------------------------------------------------------------------- the real data


def test_real_reference_files_load():
    """Slices of the real reference files (tests/fixtures/ao_classification_real, see its README.md)."""
    rows, skipped = load_suite(["geometry_of_truth", "relations", "tense", "singular_plural"], REAL_DATA, n=100, seed=0)
    assert skipped == {}
    assert list(rows) == ["geometry_of_truth", "relations", "tense", "singular_plural"]
    for name, dataset_rows in rows.items():
        assert len(dataset_rows) == 100, name
        assert answers(dataset_rows) == {"Yes": 50, "No": 50}, name
        assert all(r["question"].startswith(QUESTION_PREFIX) and r["prompt"] for r in dataset_rows)
