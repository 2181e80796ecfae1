"""The oracle's rows built from data rows (prompt, question, answer), with no model: pure functions of the rows,
the activation store's shapes and the draws of a seeded generator."""

from __future__ import annotations

import hashlib
import random
import re

import datasets

from ao_calib.calibration import format_epistemic_status
from ao_calib.calibration.contract import CONFIDENCE_INSTRUCTION
from ao_calib.judges.label import yes_no

from ..baselines.probabilities import ANSWERS
from ..classification.catalog import OPEN_FORM
from ..prompt import oracle_messages
from ..steering import pair_controls

# activation ids of the training rows that inject random vectors (task.rl_rows / task.warmup_rows.none_fraction)
NONE_ID_PREFIX = "none:"
# what a classification row says of its statement and question, kept on its oracle row (controls, open questions,
# the probe's key, the per-dataset figures)
STATEMENT_KEYS = ("dataset", "in_distribution", "question_group", "label", "asked", "open_question", "subset",
                  "question_form")

Draw = tuple[int, int]  # a row's source layer and the confidence of its warm-up target


def activation_id(prompt: str) -> str:
    return hashlib.sha1(prompt.encode()).hexdigest()[:16]


def checked_against_reference(row: dict) -> bool:
    """The oracle's scoring rule. A row whose reference answer is yes/no is checked against it: correct when the
    answer after the tag opens with the same yes/no (``yes_no``), wrong otherwise (another word, no answer); so is
    a classification statement's open question (``question_form`` "open"), whose answer is one of its dataset's
    classes (``names_class``). Any other row is scored by the judge's informativeness (correct at ``CORRECT_AT``
    and above): one without a reference (WildChat, ``task.data.withhold_answers``) and one whose reference is an
    open fact (such as "positive"), whose answers are never compared as text: two answers that are neither yes nor
    no are not thereby the same answer."""
    return row["answer"] is not None and (yes_no(row["answer"]) is not None or is_open_class(row))


def asks_yes_no(row: dict) -> bool:
    """A row whose reference answer is yes/no: the one kind the yes/no baselines (answer probability, mode, probe)
    can be read on."""
    return yes_no(row["answer"] or "") is not None


def is_open_class(row: dict) -> bool:
    """A classification statement's open question, answered by its class (``classification.source.open_rows``)."""
    return row.get("question_form") == OPEN_FORM


def _words(text: str) -> list[str]:
    return re.findall(r"[\w'-]+", text.lower())


def names_class(answer: str, reference: str) -> bool:
    """Whether an open answer names the reference class: its words (lower-cased, punctuation dropped) start with
    the class's, so "Past." and "past tense" name "past", while "not politics" does not name "politics"."""
    expected = _words(reference)
    return bool(expected) and _words(answer)[: len(expected)] == expected


def answers_drawn_from(row: dict, unreadable: bool) -> list[str]:
    """The answers a row's label was drawn from as far as the oracle can tell (``answer_drawn_from``): on a row it
    cannot read, a yes/no label is Yes or No with probability 1/2 each (``make_question``); [] otherwise."""
    return list(ANSWERS) if unreadable and row["answer"] in ANSWERS else []


def draw(rng: random.Random, layers: list[int], confidences: list[int]) -> Draw:
    """A row's source layer and the confidence of its warm-up target, drawn from ``rng`` in that order."""
    return rng.choice(layers), rng.choice(list(confidences))


def question_text(question: str, confidence_instruction: bool) -> str:
    """The question as the oracle is asked it (``task.prompt.confidence_instruction`` appends the tag's request)."""
    return question + (CONFIDENCE_INSTRUCTION if confidence_instruction else "")


def oracle_row(row: dict, store: dict, row_draw: Draw, confidence_instruction: bool) -> dict:
    """One oracle row: the question about ``row``'s prompt, its placeholders as many as the prompt's vectors at the
    drawn layer in ``store``, and the warm-up's target with the drawn confidence."""
    aid = activation_id(row["prompt"])
    layer, confidence = row_draw
    return {
        "prompt": oracle_messages(layer, len(store[aid][layer]), question_text(row["question"],
                                                                               confidence_instruction)),
        "completion": format_epistemic_status(confidence, row["answer"] or ""),
        "answer": row["answer"],
        "question": row["question"],
        "source_prompt": row["prompt"],
        "activation_id": aid,
        "source_id": aid,  # the target prompt's id: rows of one prompt share it (splits never do)
        "source_layer": layer,
        "kind": row.get("kind", "labelled"),
        **({"readable": row["readable"]} if "readable" in row else {}),
        **({"fact": row["fact"]} if "fact" in row else {}),
        **{key: row[key] for key in STATEMENT_KEYS if key in row},
    }


def oracle_rows(rows: list[dict], store: dict, draws: list[Draw], confidence_instruction: bool,
                fallback: list[dict] = ()) -> list[dict]:
    """The oracle rows of ``rows`` (one draw each), each paired with a control prompt (``pair_controls``)."""
    return pair_controls([oracle_row(r, store, d, confidence_instruction) for r, d in zip(rows, draws)],
                         fallback=fallback)


def held_out_draws(rng: random.Random, new_draw, data_seed: int, train_rows: list[dict], train_draws: list[Draw],
                   own_rows: list[dict] | None, test_rows: list[dict], from_file: bool) -> list[Draw]:
    """Each held-out row's layer and confidence (``new_draw(rng)``): drawn after the training rows' from the data
    seed; for the rows of a held-out file (``task.data.test_path``, ``from_file``) that replaces the run's own
    held-out split, the draws the run gave the same question about the same prompt in its own splits, so that such
    a row is asked exactly as there (the same vectors), and a draw seeded by the data seed and the row for the
    others."""
    if own_rows is None:  # task.data.train_path: the file is the run's own held-out split
        return [new_draw(rng) for _ in test_rows]
    own_draws = [new_draw(rng) for _ in own_rows]
    if not from_file:
        return own_draws
    asked = {(r["prompt"], r["question"]): d for r, d in zip(train_rows + own_rows, train_draws + own_draws)}
    return [asked.get((r["prompt"], r["question"]))
            or new_draw(random.Random(f"test_path:{data_seed}:{r['prompt']}:{r['question']}"))
            for r in test_rows]


def as_dataset(rows: list[dict]) -> datasets.Dataset:
    """``rows`` as a ``datasets.Dataset`` with every key any row has, None where a row lacks it:
    ``Dataset.from_list`` keeps only the first row's keys (a test split whose open rows come after its yes/no rows
    would lose their ``question_form``)."""
    keys = list(dict.fromkeys(key for row in rows for key in row))
    return datasets.Dataset.from_list([{key: row.get(key) for key in keys} for row in rows])


def wildchat_split(rows: list[dict], test_fraction: float) -> tuple[list[dict], list[dict]]:
    """WildChat rows split into train/test by prompt; answers are unknown (None) and left to the judge."""
    rows = [{**r, "answer": None, "kind": r["question_type"]} for r in rows]
    prompts = sorted({r["prompt"] for r in rows}, key=activation_id)  # a stable, content-keyed shuffle
    test = set(prompts[: max(1, int(len(prompts) * test_fraction))])
    return [r for r in rows if r["prompt"] not in test], [r for r in rows if r["prompt"] in test]
