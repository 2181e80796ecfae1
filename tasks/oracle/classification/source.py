"""``task.data.classification``: the Activation Oracle paper's yes/no classification files as an oracle run's rows.

Every file of the folder is read with all its rows (``datasets.load_folder``), split by statement per dataset
(``datasets.split_by_prompt``: no statement in two splits, Yes/No balanced), and each split is capped per
dataset by whole statements drawn by the seed. The Engels probes are out-of-distribution test rows only. Every row
names its ``dataset`` and whether it is ``in_distribution``; its ``kind`` is its dataset.
"""

from __future__ import annotations

import random
from collections import Counter

from ao_calib.core.errors import AOCalibError

from .datasets import OOD_SPLIT, is_engels, load_folder, shipped_data_dir, split_by_prompt
from .catalog import OPEN_FORM, OPEN_GROUP
from .splits import balanced, question_key
from ..config import OracleClassificationDataConfig

KEY = "task.data.classification"
SPLITS = ("train", "validation", "test")


def classification_splits(config: OracleClassificationDataConfig, seed: int) -> dict[str, list[dict]]:
    """``{"train", "validation", "test"}`` rows: the named datasets' splits, each capped per dataset (``n_train``,
    ``n_validation``, ``n_test``), and in ``test`` after them the Engels probes' rows (``n_ood`` each) when
    ``config.ood``. A named dataset without rows is refused, naming the key."""
    data_dir = config.data_dir or shipped_data_dir(f"{KEY}.data_dir")
    rows = load_folder(data_dir, seed, all_paraphrases=config.all_paraphrases)
    found = sorted({r["dataset"] for r in rows if not is_engels(r["dataset"])})
    missing = [name for name in config.datasets if name not in found]
    if missing:
        raise AOCalibError(f"{KEY}.datasets: {missing} have no rows in {data_dir} (its datasets: {found})")
    wanted = set(config.datasets)
    rows = [r for r in rows if r["dataset"] in wanted or (config.ood and is_engels(r["dataset"]))]
    splits = split_by_prompt(rows, tuple(config.fractions), seed)
    caps = {"train": config.n_train, "validation": config.n_validation, "test": config.n_test}
    out = {name: capped(splits[name], caps[name], f"{seed}:{name}") for name in SPLITS}
    out["test"] += capped(splits[OOD_SPLIT], config.n_ood, f"{seed}:{OOD_SPLIT}")
    if config.open_rows:
        for name in ("validation", "test"):
            out[name] += open_rows(out[name])
    for name in SPLITS:
        out[name] = [{**r, "kind": r["dataset"], "in_distribution": not is_engels(r["dataset"])} for r in out[name]]
        if not out[name] and name != "validation":
            raise AOCalibError(f"{KEY}: the {name} split is empty (fractions={list(config.fractions)})")
    return out


def open_rows(rows: list[dict]) -> list[dict]:
    """Each statement's open question (a row whose ``fact`` is its class), once per statement, answered by the class:
    ``question_form`` "open", its ``question_group`` the dataset's with ``OPEN_GROUP``."""
    asked: dict[str, dict] = {}
    for row in rows:
        if row.get("fact") and row.get("open_question"):
            asked.setdefault(row["prompt"], row)
    return [{**{k: v for k, v in row.items() if k != "asked"}, "question": row["open_question"], "answer": row["fact"],
             "question_group": f"{row['dataset']}/{OPEN_GROUP}", "question_form": OPEN_FORM}
            for row in asked.values()]


def capped(rows: list[dict], cap: int, seed: str) -> list[dict]:
    """At most ``cap`` rows per dataset, whole statements (every question about a kept prompt) drawn by ``seed`` in
    ``paired_order``, taken until the next statement would pass the cap, then evened per question (``balanced``);
    rows keep their order."""
    kept: set[tuple[str, str]] = set()
    for dataset in sorted({r["dataset"] for r in rows}):
        part = [r for r in rows if r["dataset"] == dataset]
        sizes = Counter(r["prompt"] for r in part)
        total = 0
        for prompt in paired_order(part, random.Random(f"classification_cap:{dataset}:{seed}")):
            if total + sizes[prompt] > cap:
                break
            kept.add((dataset, prompt))
            total += sizes[prompt]
    copies = [dict(r) for r in rows if (r["dataset"], r["prompt"]) in kept]
    order = {id(r): i for i, r in enumerate(copies)}  # balanced() rewords rows in place
    out = []
    for dataset in sorted({r["dataset"] for r in copies}):
        part = [r for r in copies if r["dataset"] == dataset]
        out += balanced(part, random.Random(f"classification_cap_balance:{dataset}:{seed}"))
    return sorted(out, key=lambda r: order[id(r)])


def paired_order(rows: list[dict], rng: random.Random) -> list[str]:
    """The prompts of ``rows`` in an order whose every prefix is near even per question: grouped by the questions
    they are asked (``question_key``) and split by their answers, the groups visited in a random order, each visit
    taking the next prompt of each answer, so a Yes and a No statement of one question come in turn."""
    strata: dict[tuple, dict[tuple, list[str]]] = {}
    questions: dict[str, set] = {}
    answers: dict[str, set] = {}
    for r in rows:
        questions.setdefault(r["prompt"], set()).add(question_key(r))
        answers.setdefault(r["prompt"], set()).add(r["answer"])
    for prompt in sorted(questions):
        strata.setdefault(tuple(sorted(questions[prompt])), {}).setdefault(
            tuple(sorted(answers[prompt])), []).append(prompt)
    visits = sorted(strata)
    rng.shuffle(visits)
    for key in visits:
        for side in strata[key].values():
            rng.shuffle(side)
    order, depth = [], 0
    while len(order) < len(questions):
        order += [side[depth] for key in visits for _, side in sorted(strata[key].items()) if depth < len(side)]
        depth += 1
    return order


def summary(splits: dict[str, list[dict]]) -> str:
    """One line per split: its rows per dataset."""
    return "; ".join(f"{name}: " + ", ".join(f"{d} {n}" for d, n in Counter(r["dataset"] for r in rows).items())
                     for name, rows in splits.items())
