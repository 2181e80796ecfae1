"""Classification rows split into train / validation / test by statement, the out-of-distribution probes apart."""

from __future__ import annotations

import random
from collections.abc import Callable, Iterable, Mapping, Sequence

from ao_calib.core.errors import DataValidationError

from .catalog import NO, OOD_SPLIT, SPLITS, YES, is_engels


def split_by_prompt(rows: Iterable[Mapping], fractions: Sequence[float] = (0.8, 0.1, 0.1), seed: int = 0, *,
                    ood: Callable[[str], bool] = is_engels, balance: bool = True) -> dict[str, list[dict]]:
    """Rows split into ``train``, ``validation`` and ``test`` per dataset by their statement (``prompt``), so no
    prompt is in two splits, plus ``ood_test``: every row of the datasets ``ood`` picks (the Engels probes by
    default), never in the other splits.

    Within each dataset the distinct prompts are grouped by the questions they are asked and the answers they carry
    (``question_key``: the tense asked and Yes, say), and each group is shuffled (by ``seed`` and the dataset's
    name) and cut by ``fractions`` (train, validation, test; they must sum to 1), so the splits keep the dataset's
    Yes/No mix per question. A prompt found in several datasets keeps the
    split of the first dataset (by name) that has it; one that is also in an ``ood`` dataset goes to ``test``.
    ``balance`` then drops random rows of the larger answer in each dataset's split until Yes and No are even
    (where a split has both), per question asked (``question_key``), and gives each dropped-to-even pair of a Yes
    and a No row one wording (``paired_wordings``), so that no question text tells its answer. Rows keep their input
    order within a split; the result does not depend on it."""
    fractions = _check_fractions(fractions)
    rows = [dict(r) for r in rows]
    for index, row in enumerate(rows):
        for field in ("dataset", "prompt", "answer"):
            if not isinstance(row.get(field), str):
                raise DataValidationError("split_by_prompt rows", index, field, "must be a string")
    by_dataset: dict[str, list[dict]] = {}
    for row in rows:
        by_dataset.setdefault(row["dataset"], []).append(row)
    ood_names = sorted(d for d in by_dataset if ood(d))
    split_of = {row["prompt"]: "test" for d in ood_names for row in by_dataset[d]}
    for dataset in sorted(set(by_dataset) - set(ood_names)):
        _assign_prompts(by_dataset[dataset], split_of, fractions, random.Random(f"ao_split:{dataset}:{seed}"))
    out: dict[str, list[dict]] = {split: [] for split in (*SPLITS, OOD_SPLIT)}
    for dataset in sorted(by_dataset):
        parts = ({OOD_SPLIT: by_dataset[dataset]} if dataset in ood_names
                 else {s: [r for r in by_dataset[dataset] if split_of[r["prompt"]] == s] for s in SPLITS})
        for split, part in parts.items():
            out[split] += balanced(part, random.Random(f"ao_split_balance:{dataset}:{split}:{seed}")) \
                if balance else part
    order = {id(row): i for i, row in enumerate(rows)}
    return {split: sorted(part, key=lambda r: order[id(r)]) for split, part in out.items()}


def _check_fractions(fractions: Sequence[float]) -> tuple[float, float, float]:
    values = tuple(fractions)
    if (len(values) != 3 or any(isinstance(f, bool) or not isinstance(f, (int, float)) or f < 0 for f in values)
            or abs(sum(values) - 1) > 1e-9):
        raise ValueError(f"fractions must be three non-negative numbers (train, validation, test) summing to 1, "
                         f"got {fractions!r}")
    return values  # type: ignore[return-value]


def _assign_prompts(rows: list[dict], split_of: dict[str, str], fractions: tuple[float, float, float],
                    rng: random.Random) -> None:
    """Gives each prompt of one dataset not yet in ``split_of`` a split, cutting each answer group by fractions."""
    answers: dict[str, set[tuple]] = {}
    for row in rows:  # a prompt's stratum: the questions it is asked and their answers
        if row["prompt"] not in split_of:
            answers.setdefault(row["prompt"], set()).add((*question_key(row), row["answer"]))
    strata: dict[tuple, list[str]] = {}
    for prompt in sorted(answers):  # sorted: the split does not depend on the rows' order
        strata.setdefault(tuple(sorted(answers[prompt])), []).append(prompt)
    for key in sorted(strata):
        prompts = strata[key]
        rng.shuffle(prompts)
        cut_train = round(len(prompts) * fractions[0])
        cut_validation = round(len(prompts) * (fractions[0] + fractions[1]))
        for i, prompt in enumerate(prompts):
            split_of[prompt] = SPLITS[0] if i < cut_train else SPLITS[1] if i < cut_validation else SPLITS[2]


def question_key(row: Mapping) -> tuple[str, str]:
    """The question a row asks, whatever its wording: its paraphrase group and the class it asks about (``asked``,
    on the rows of the shipped files); a row that names no class asked is keyed by its own wording."""
    return str(row.get("question_group", "")), str(row["asked"] if "asked" in row else row.get("question"))


def balanced(rows: list[dict], rng: random.Random) -> list[dict]:
    """``rows`` less random rows of the larger answer of each question (``question_key``), so Yes and No are even per
    question (a question asked with one answer only is dropped, unless every row has that answer), each Yes row's
    wording given to a No row."""
    by_key: dict[tuple[str, str], list[int]] = {}
    for i, row in enumerate(rows):
        by_key.setdefault(question_key(row), []).append(i)
    if len({row["answer"] for row in rows} & {YES, NO}) < 2:
        return rows
    dropped: set[int] = set()
    for key in sorted(by_key):
        yes = [i for i in by_key[key] if rows[i]["answer"] == YES]
        no = [i for i in by_key[key] if rows[i]["answer"] == NO]
        for side in (yes, no):  # so input order does not matter
            side.sort(key=lambda i: (rows[i]["prompt"], str(rows[i].get("question"))))
        larger, smaller = (yes, no) if len(yes) > len(no) else (no, yes)
        dropped |= set(rng.sample(larger, len(larger) - len(smaller)))
        paired_wordings(rows, [i for i in yes if i not in dropped], [i for i in no if i not in dropped], rng)
    return [r for i, r in enumerate(rows) if i not in dropped]


def paired_wordings(rows: list[dict], yes: list[int], no: list[int], rng: random.Random) -> None:
    """Pairs the Yes and No rows of one question at random and gives each No row its Yes row's wording: every
    question text is then asked as often with Yes as with No."""
    rng.shuffle(no)
    for i, j in zip(yes, no):
        rows[j]["question"] = rows[i]["question"]  # in place: the caller's copies, ordered by identity
