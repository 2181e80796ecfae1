"""Each training stage's rows, shaped from the training rows: warmup=sft's (``task.warmup_rows``) and GRPO's
(``task.rl_rows``). Pure functions of the rows, the switches and the data seed; the random-vector rows add their
vectors to the activation store they are given."""

from __future__ import annotations

import logging
import random
from collections.abc import Callable

from ao_calib.calibration import format_epistemic_status, parse_epistemic_status
from ao_calib.core.errors import AOCalibError

from ..classification.catalog import OPEN_FORM
from ..config import OracleRLRowsConfig, OracleWarmupRowsConfig
from .generate import NOT_STATED, open_question
from ..prompt import oracle_messages
from .oracle import NONE_ID_PREFIX, answers_drawn_from, question_text
from ..steering import noise_like

log = logging.getLogger(__name__)


def prompts_of_stage(train: list[dict], share: float, data_seed: int, rl: bool) -> list[dict]:
    """``task.rl_rows.reserved_prompts``: the training rows of the prompts kept for the RL stage (``rl``), or of the
    others (the warm-up's); every row when the share is 0. Whole prompts, drawn by the data seed, so that no
    prompt the warm-up fitted reaches the RL stage."""
    if not share:
        return train
    prompts = sorted({row["source_id"] for row in train})
    reserved = set(random.Random(f"rl_reserved:{data_seed}").sample(prompts, round(len(prompts) * share)))
    kept = [row for row in train if (row["source_id"] in reserved) == rl]
    if not kept:
        raise AOCalibError(f"task.rl_rows.reserved_prompts={share} leaves the {'RL stage' if rl else 'warm-up'} no "
                           f"training prompt of {len(prompts)}")
    log.info("%s: %d training rows of %d of the %d training prompts (task.rl_rows.reserved_prompts)",
             "RL stage" if rl else "warm-up", len(kept), len(reserved) if rl else len(prompts) - len(reserved),
             len(prompts))
    return kept


def with_unreadable_share(train: list[dict], share: float, data_seed: int) -> list[dict]:
    """``task.rl_rows.unreadable_fraction``: every row about an unstated fact (``readable`` false) and as many of the
    others, drawn by the data seed, as make that share; all rows when the share is already there."""
    if not share:
        return train
    unreadable = [i for i, row in enumerate(train) if row.get("readable") is False]
    if not unreadable:
        raise AOCalibError(f"task.rl_rows.unreadable_fraction={share}: no training row is marked unreadable "
                           "(readable: false, generated data with task.data.generate.stated_fraction < 1)")
    readable = [i for i in range(len(train)) if train[i].get("readable") is not False]
    keep = min(len(readable), round(len(unreadable) * (1 - share) / share))
    kept = set(unreadable) | set(random.Random(f"rl_unreadable:{data_seed}").sample(readable, keep))
    log.info("RL training rows: %d about unstated facts, %d of %d readable ones (task.rl_rows.unreadable_fraction)",
             len(unreadable), keep, len(readable))
    return [row for i, row in enumerate(train) if i in kept]


def none_rows(train: list[dict], store: dict, fraction: float, key: str, data_seed: int) -> list[dict]:
    """``task.rl_rows.none_fraction`` / ``task.warmup_rows.none_fraction`` (``key`` rl_none / sft_none, which
    seeds the draw): copies of training rows whose activation id names random vectors of the norms of the row's own
    (added to ``store``), so that they make that share of the training rows."""
    if not fraction:
        return []
    rng = random.Random(f"{key}:{data_seed}")
    picked = rng.sample(train, round(len(train) * fraction / (1 - fraction)))
    rows = []
    for row in picked:
        aid = NONE_ID_PREFIX + row["activation_id"]
        layer = int(row["source_layer"])
        store.setdefault(aid, {})[layer] = noise_like(store[row["activation_id"]][layer], f"train:{aid}:{layer}")
        rows.append({**row, "activation_id": aid, "readable": False})  # nothing to read: a coin-flip row
    log.info("%s training rows: %d of %d carry random vectors in place of activations (task.%s.none_fraction)",
             "RL" if key == "rl_none" else "warm-up", len(rows), len(train) + len(rows),
             "rl_rows" if key == "rl_none" else "warmup_rows")
    return rows


def rl_rows(train: list[dict], switches: OracleRLRowsConfig, store: dict, data_seed: int) -> list[dict]:
    """The RL stage's rows: the training rows (of the prompts ``reserved_prompts`` keeps for it, when set), with
    ``unreadable_fraction`` of them about unstated facts (readable rows left out at random to make that share) and
    ``none_fraction`` of copies injecting random vectors; with ``expected_over_draw``, each row names the answers
    its label was drawn from."""
    train = with_unreadable_share(prompts_of_stage(train, switches.reserved_prompts, data_seed, rl=True),
                                  switches.unreadable_fraction, data_seed)
    train += none_rows(train, store, switches.none_fraction, "rl_none", data_seed)
    if switches.expected_over_draw:  # the reward takes its expectation over the label's draw
        train = [{**row, "answer_drawn_from": answers_drawn_from(row, row.get("readable") is False)}
                 for row in train]
        drawn = sum(bool(r["answer_drawn_from"]) for r in train)
        (log.info if drawn else log.warning)(
            "RL training rows: %d of %d scored against both answers their label could have been "
            "(task.rl_rows.expected_over_draw)%s", drawn, len(train),
            "" if drawn else ": no yes/no row is marked unreadable (readable: false), so the key changes nothing")
    return train


def answer_is_a_coin_flip(row: dict, switches: OracleWarmupRowsConfig) -> bool:
    """A warm-up row kept as its yes/no question with the answer out of the loss: one that injects random vectors
    (``task.warmup_rows.none_fraction``), or one about an unstated fact with ``unstated_tag_only``."""
    return (row["activation_id"].startswith(NONE_ID_PREFIX)
            or switches.unstated_tag_only and row.get("readable") is False)


def unstated(row: dict, switches: OracleWarmupRowsConfig) -> bool:
    """A row whose fact the prompt does not state, to be answered "not stated" (``open_unstated``)."""
    return switches.open_unstated and row.get("readable") is False


def asked_openly(row: dict, rng: random.Random, switches: OracleWarmupRowsConfig, store: dict, phrasings: int,
                 confidence_instruction: bool) -> dict:
    """``row`` (one with a known ``fact``) asked as an open question about its fact: its own (a classification
    statement's ``open_question``), or one of its kind's in a wording drawn from ``rng``; the same activations and
    layer, the answer the fact itself, or "not stated" where the prompt does not state it and ``open_unstated``
    asks for that."""
    question = row.get("open_question") or open_question(row["kind"], rng, phrasings)
    num_vectors = len(store[row["activation_id"]][int(row["source_layer"])])
    form = {"question_form": OPEN_FORM} if row.get("open_question") else {}
    return {**row, **form, "question": question, "answer": NOT_STATED if unstated(row, switches) else row["fact"],
            "prompt": oracle_messages(int(row["source_layer"]), num_vectors,
                                      question_text(question, confidence_instruction))}


AskOpenly = Callable[[dict, random.Random], dict]  # a row asked as the open question about its fact


def with_open_questions(rows: list[dict], switches: OracleWarmupRowsConfig, data_seed: int,
                        ask_openly: AskOpenly) -> list[dict]:
    """``open_fraction`` of the rows with a known fact, asked as an open question (``ask_openly(row, rng)``) whose
    target answer is the fact (the same activations, layer and drawn confidence); the choice of rows and wordings is
    seeded by the data seed, so every run on the same data asks the same ones."""
    rng = random.Random(f"open:{data_seed}")
    # an unstated fact's row is always asked openly (its yes/no label is a coin flip), worded from its own
    # generator, so that the readable rows are asked exactly as without open_unstated
    unstated_rng = random.Random(f"open_unstated:{data_seed}")
    shaped, asked = [], 0
    for row in rows:
        is_unstated = unstated(row, switches)
        # a coin-flip row stays its yes/no question (the answer out of the loss)
        if (row.get("fact") and not answer_is_a_coin_flip(row, switches)
                and (is_unstated or rng.random() < switches.open_fraction)):
            confidence = parse_epistemic_status(row["completion"]).confidence
            row = ask_openly(row, unstated_rng if is_unstated else rng)
            row["completion"] = format_epistemic_status(confidence, row["answer"])
            asked += 1
        shaped.append(row)
    log.info("warm-up: %d of %d rows asked as open questions (task.warmup_rows.open_fraction, "
             "task.warmup_rows.open_unstated)", asked, len(shaped))
    return shaped


def coin_flip_columns(rows: list[dict], switches: OracleWarmupRowsConfig) -> dict[str, list]:
    """The columns marking the warm-up's coin-flip rows: ``answer_in_loss`` (false on them: a coin-flip label
    teaches nothing to read; the tag still learns from the row) and ``answer_drawn_from`` (the label's draw, over
    which warmup.calibration_expected_over_draw may take the number's expectation)."""
    coins = [answer_is_a_coin_flip(row, switches) for row in rows]
    return {"answer_in_loss": [not coin for coin in coins],
            "answer_drawn_from": [answers_drawn_from(row, coin) for row, coin in zip(rows, coins)]}


def keeps_in_warmup(row: dict, switches: OracleWarmupRowsConfig) -> bool:
    """``readable_only``: a row the warm-up trains on (readable, or an unstated one another switch keeps: asked
    openly with ``open_unstated``, or tag-only with ``unstated_tag_only``)."""
    return switches.open_unstated or switches.unstated_tag_only or row.get("readable") is not False


def warmup_shapes_rows(switches: OracleWarmupRowsConfig) -> bool:
    """Whether any switch changes warmup=sft's rows from the training rows."""
    return bool(switches.readable_only or switches.none_fraction or switches.open_fraction
                or switches.open_unstated or switches.unstated_tag_only)


def warmup_rows(train: list[dict], switches: OracleWarmupRowsConfig, store: dict, data_seed: int,
                ask_openly: AskOpenly | None) -> list[dict]:
    """warmup=sft's rows: the training rows, or only the readable ones (``readable_only``), plus copies that inject
    random vectors (``none_fraction``), some asked as open questions (``open_fraction``, ``open_unstated``;
    ``ask_openly(row, rng)``), the coin-flip rows marked (``coin_flip_columns``)."""
    rows = train
    if switches.readable_only:
        # with open_unstated the unstated rows stay, each to be asked openly ("not stated")
        rows = [row for row in rows if keeps_in_warmup(row, switches)]
        log.info("warm-up: %d of %d training rows hold their answer in the prompt (task.warmup_rows.readable_only)",
                 sum(row.get("readable") is not False for row in rows), len(train))
    if switches.none_fraction:
        rows = rows + none_rows(rows, store, switches.none_fraction, "sft_none", data_seed)
    if switches.open_fraction or switches.open_unstated:
        rows = with_open_questions(rows, switches, data_seed, ask_openly)
    if switches.unstated_tag_only or switches.none_fraction:
        columns = coin_flip_columns(rows, switches)
        rows = [{**{k: v for k, v in row.items() if k not in columns},
                 **{name: values[i] for name, values in columns.items()}} for i, row in enumerate(rows)]
        log.info("warm-up: %d rows keep their answer out of the loss (unstated facts: "
                 "task.warmup_rows.unstated_tag_only; random vectors: task.warmup_rows.none_fraction)",
                 columns["answer_in_loss"].count(False))
    return rows
