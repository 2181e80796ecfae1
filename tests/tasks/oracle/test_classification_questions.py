"""What the classification rows ask: each statement's open question answered by its class, yes/no questions whose
wording tells nothing of the answer, controls from the same dataset, and the probe keyed by the class asked."""

from __future__ import annotations

import collections
import random
from pathlib import Path

import pytest

from ao_calib_tasks.oracle.classification.datasets import QUESTION_PREFIX, TENSES, load_folder
from ao_calib_tasks.oracle.classification.catalog import CLASS_WORDS, ENGELS_PROBES
from ao_calib_tasks.oracle.classification.reading import asked_in, balanced_asks, shipped_paraphrases
from ao_calib_tasks.oracle.baselines.methods import probe_key
from ao_calib_tasks.oracle.rows.oracle import names_class
from ao_calib_tasks.oracle.steering import pair_controls

SHIPPED = Path(__file__).resolve().parents[3] / "data" / "ao_classification"


@pytest.fixture(scope="module")
def rows() -> list[dict]:
    return load_folder(SHIPPED, seed=4, all_paraphrases=True)


def classes_of(dataset: str) -> set[str] | None:
    """The words an open answer of ``dataset`` names its classes with (None: an open set, relations' objects)."""
    if dataset == "tense":
        return set(TENSES)
    if dataset in CLASS_WORDS:
        return set(CLASS_WORDS[dataset].values())
    if dataset.startswith("engels_"):
        group = dataset.removeprefix("engels_")
        labels = next(v[1:] for v in ENGELS_PROBES.values() if v[0] == group)
        return {label.replace("_", " ") for label in labels}
    return None


def test_every_statement_has_an_open_question_answered_by_its_class(rows):
    by_dataset = collections.defaultdict(list)
    for row in rows:
        by_dataset[row["dataset"]].append(row)
    assert len(by_dataset) == 8
    for dataset, part in by_dataset.items():
        classes = classes_of(dataset)
        facts = collections.Counter(r["fact"] for r in part)
        if classes is None:  # relations: the object the statement names, read from the statement itself
            assert all(r["fact"] in r["prompt"] for r in part)
            assert len(facts) > 50
            continue
        assert set(facts) == classes, dataset  # every class, nothing else
        for row in part:  # the open question names the options, so the answer's words are fixed by it
            assert all(c in row["open_question"] for c in classes), row["open_question"]
            yes = row["answer"] == "Yes"
            # a Yes row asks about the statement's own class, a No row about another
            assert (row["asked"] == row["label"]) == yes or dataset == "geometry_of_truth"


def test_each_class_is_asked_about_as_often_with_yes_as_with_no():
    rng = random.Random(0)
    # uneven classes, none of them half the statements (at half, only one assignment is even, and past it none)
    labels = rng.choices(TENSES, weights=(4, 3, 3), k=301)
    asks = balanced_asks(random.Random(1), labels, TENSES)
    counts = collections.Counter((asked, yes) for yes, asked in asks)
    assert all(abs(counts[c, True] - counts[c, False]) <= 1 for c in TENSES), counts
    assert all(asked == label for label, (yes, asked) in zip(labels, asks) if yes)
    assert all(asked != label for label, (yes, asked) in zip(labels, asks) if not yes)


def test_the_probe_key_reads_the_class_asked_from_every_paraphrase(rows):
    templates = shipped_paraphrases()["tense"]
    for template in templates:
        for tense in TENSES:
            assert asked_in(QUESTION_PREFIX + template.replace("{}", tense), templates) == tense, template
    # "presented" holds "present": the wording is parsed, not searched
    assert asked_in("Is the narrative presented in the future tense?", templates) == "future"
    for row in rows:
        key = probe_key(row)
        assert key[2] == row["asked"]
        if row["dataset"] == "tense":  # a row that names no class asked is keyed by the parse, alike
            assert probe_key({k: v for k, v in row.items() if k != "asked"}) == key
    # one probe per question: the same key means the same yes/no question
    meaning = {}
    for row in rows:
        assert meaning.setdefault(probe_key(row), (row["question_group"], row["asked"])) == (row["question_group"],
                                                                                              row["asked"])


def test_the_control_is_another_statement_of_the_same_dataset_and_another_class():
    rows = [{"dataset": d, "activation_id": f"{d}{i}", "label": ("a", "b", "c")[i % 3] if d != "flat" else "x"}
            for d in ("tense", "gmt", "flat") for i in range(12)]
    paired = pair_controls(rows)
    dataset_of = {r["activation_id"]: r["dataset"] for r in rows}
    label_of = {r["activation_id"]: r["label"] for r in rows}
    for row in paired:
        other = row["control_activation_id"]
        assert other != row["activation_id"] and dataset_of[other] == row["dataset"]
        assert label_of[other] != row["label"] or row["dataset"] == "flat"  # one class: any other statement
    assert pair_controls(list(reversed(rows))) == list(reversed(paired))  # the order rows come in does not matter


@pytest.mark.parametrize("answer, reference, named", [
    ("Past.", "past", True), ("past tense", "past", True), ("The past", "past", False),
    ("politics", "not politics", False), ("not politics", "politics", False), ("Not politics!", "not politics", True),
    ("several", "one", False), ("", "one", False), ("New York City", "New York", True),
])
def test_an_open_answer_is_scored_by_the_class_it_names(answer, reference, named):
    assert names_class(answer, reference) is named
