"""Train / validation / test rows split by statement, with the Engels probes as out-of-distribution test rows
(tasks/oracle/classification/datasets.py, ``split_by_prompt``)."""

from __future__ import annotations

import collections
import random
from pathlib import Path

import pytest

from ao_calib.core.errors import DataValidationError
from ao_calib_tasks.oracle.classification.datasets import OOD_SPLIT, SPLITS, load_classification, split_by_prompt

SHIPPED = Path(__file__).resolve().parents[3] / "data" / "ao_classification"
NAMES = ("geometry_of_truth", "relations", "tense", "singular_plural", "engels_hist_fig_ismale",
         "engels_headline_istrump")


@pytest.fixture(scope="module")
def rows() -> list[dict]:
    return [r for name in NAMES for r in load_classification(name, SHIPPED, n=200, seed=0)]


def prompts(part: list[dict]) -> set[str]:
    return {r["prompt"] for r in part}


def test_splits_are_disjoint_by_prompt_and_keep_every_dataset(rows):
    splits = split_by_prompt(rows, (0.7, 0.15, 0.15), seed=0)
    assert set(splits) == {*SPLITS, OOD_SPLIT}
    names = list(splits)
    for i, a in enumerate(names):
        for b in names[i + 1:]:
            assert not prompts(splits[a]) & prompts(splits[b]), (a, b)
    assert {r["dataset"] for r in splits[OOD_SPLIT]} == {"engels_hist_fig_ismale", "engels_headline_istrump"}
    for split in SPLITS:
        assert {r["dataset"] for r in splits[split]} == {"geometry_of_truth", "relations", "tense",
                                                         "singular_plural"}
    # balancing each question drops a few rows; each dataset's split is near its fraction and Yes/No even
    assert len(rows) * 0.9 <= sum(len(p) for p in splits.values()) <= len(rows)
    for split, fraction in zip(SPLITS, (0.7, 0.15, 0.15)):
        counts = collections.defaultdict(collections.Counter)
        for row in splits[split]:
            counts[row["dataset"]][row["answer"]] += 1
        for dataset, c in counts.items():
            assert c["Yes"] == c["No"], (split, dataset)
            assert 200 * fraction * 0.8 <= c["Yes"] + c["No"] <= 200 * fraction + 4, (split, dataset)


def text_only_accuracy(rows: list[dict]) -> float:
    """The best any rule reading only the question text can score on ``rows``: each text's majority answer."""
    by_text = collections.defaultdict(collections.Counter)
    for row in rows:
        by_text[row["question"]][row["answer"]] += 1
    return sum(max(c.values()) for c in by_text.values()) / len(rows)


def test_every_question_text_is_asked_as_often_with_yes_as_with_no():
    # every paraphrase in play: the wording of a No row is its paired Yes row's
    rows = [r for name in NAMES for r in load_classification(name, SHIPPED, n=300, seed=2, all_paraphrases=True)]
    unbalanced = split_by_prompt(rows, seed=2, balance=False)
    assert max(text_only_accuracy([r for r in unbalanced["train"] if r["dataset"] == name])
               for name in ("tense", "singular_plural")) > 0.6  # without it, the wording tells the answer
    splits = split_by_prompt(rows, seed=2)
    for split in SPLITS:
        for name in ("geometry_of_truth", "relations", "tense", "singular_plural"):
            part = [r for r in splits[split] if r["dataset"] == name]
            assert text_only_accuracy(part) == 0.5, (split, name)
            for r in part:  # a wording moved onto a No row still asks the class that row asks about
                assert r["asked"] in r["question"] or name == "singular_plural" or r["asked"] == "true"


def test_splits_are_deterministic_and_ignore_row_order(rows):
    splits = split_by_prompt(rows, seed=0)
    assert split_by_prompt(rows, seed=0) == splits
    shuffled = list(rows)
    random.Random(5).shuffle(shuffled)
    again = split_by_prompt(shuffled, seed=0)
    key = lambda r: (r["dataset"], r["prompt"], r["question"])  # noqa: E731
    assert {s: sorted(map(key, p)) for s, p in again.items()} == {s: sorted(map(key, p)) for s, p in splits.items()}
    other = split_by_prompt(rows, seed=1)
    assert prompts(other["train"]) != prompts(splits["train"])


def row(dataset: str, prompt: str, answer: str, question: str = "Is this true?") -> dict:
    return {"dataset": dataset, "prompt": prompt, "question": question, "answer": answer}


def test_repeated_prompts_stay_in_one_split_across_datasets_and_ood():
    data = []
    for i in range(30):
        answer = "Yes" if i % 2 else "No"
        data += [row("a", f"s{i}", answer), row("a", f"s{i}", "No" if i % 2 else "Yes", "Is this false?")]
        data.append(row("b", f"s{i}", answer))  # the same statements in a second dataset
        data.append(row("b", f"t{i}", answer))
    data += [row("engels_x", "t3", "Yes"), row("engels_x", "u1", "No")]  # t3 also in dataset b
    splits = split_by_prompt(data, (0.5, 0.25, 0.25), seed=3)
    seen: dict[str, str] = {}
    for split in SPLITS:
        for r in splits[split]:
            assert seen.setdefault(r["prompt"], split) == split
    assert seen["t3"] == "test"  # an out-of-distribution statement is never trained on
    assert [r["prompt"] for r in splits[OOD_SPLIT]] == ["t3", "u1"]


def test_unbalanced_data_is_balanced_per_split_or_kept():
    data = [row("a", f"y{i}", "Yes") for i in range(40)] + [row("a", f"n{i}", "No") for i in range(10)]
    data += [row("only_yes", f"o{i}", "Yes") for i in range(10)]
    splits = split_by_prompt(data, (0.6, 0.2, 0.2), seed=0)
    for split in SPLITS:
        c = collections.Counter(r["answer"] for r in splits[split] if r["dataset"] == "a")
        assert c["Yes"] == c["No"] > 0
    assert sum(r["dataset"] == "only_yes" for s in SPLITS for r in splits[s]) == 10  # one answer: nothing dropped
    kept = split_by_prompt(data, (0.6, 0.2, 0.2), seed=0, balance=False)
    assert sum(len(kept[s]) for s in SPLITS) == len(data)


def test_ood_choice_and_bad_arguments():
    data = [row("a", "p", "Yes"), row("held", "q", "No")]
    splits = split_by_prompt(data, (1.0, 0.0, 0.0), ood=lambda d: d == "held")
    assert [r["prompt"] for r in splits["train"]] == ["p"] and [r["prompt"] for r in splits[OOD_SPLIT]] == ["q"]
    for fractions in [(0.8, 0.1), (0.8, 0.3, 0.1), (1.2, -0.1, -0.1)]:
        with pytest.raises(ValueError, match="fractions"):
            split_by_prompt(data, fractions)
    with pytest.raises(DataValidationError) as err:
        split_by_prompt([{"dataset": "a", "prompt": 3, "answer": "Yes"}])
    assert (err.value.row, err.value.field) == (0, "prompt")
