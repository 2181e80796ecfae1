"""The oracle's row building and each stage's row shaping as pure functions: data rows and a store of vectors in,
rows out, with no model. And the row switches' old keys, refused at start-up naming their new ones."""

from __future__ import annotations

import random

import pytest
import torch

from ao_calib.calibration import parse_epistemic_status
from ao_calib.core.errors import AOCalibError
from ao_calib_tasks.oracle.rows import stages as stage_rows
from ao_calib_tasks.oracle.config import OracleRLRowsConfig, OracleWarmupRowsConfig
from ao_calib_tasks.oracle.rows.generate import NOT_STATED, OPEN_QUESTIONS
from ao_calib_tasks.oracle.rows.oracle import (NONE_ID_PREFIX, activation_id, draw, held_out_draws, oracle_rows,
                                        wildchat_split)
from tests.helpers.commands import run_cli

LAYERS = [3, 6]


def data_rows(n_prompts: int = 12, unstated_every: int = 3) -> list[dict]:
    """Two mood questions per prompt, the mood unstated in every ``unstated_every``-th prompt."""
    rows = []
    for i in range(n_prompts):
        readable = i % unstated_every != 0
        for answer in ("Yes", "No"):
            rows.append({"prompt": f"prompt {i}", "question": f"Is the mood {answer}?", "answer": answer,
                         "kind": "mood", "fact": "positive", "readable": readable})
    return rows


def store_of(rows: list[dict], width: int = 4) -> dict:
    """Each prompt's vectors at every layer: as many as the prompt's number plus one, a different norm each."""
    store = {}
    for row in rows:
        k = int(row["prompt"].split()[-1]) % 3 + 1
        store[activation_id(row["prompt"])] = {layer: torch.randn(k, width, generator=torch.Generator().manual_seed(
            layer * 100 + k)) * (1 + k) for layer in LAYERS}
    return store


def built(rows: list[dict], seed: int = 0) -> tuple[list[dict], dict]:
    store = store_of(rows)
    rng = random.Random(seed)
    return oracle_rows(rows, store, [draw(rng, LAYERS, [50, 90]) for _ in rows], False), store


def test_an_oracle_row_asks_about_its_prompt_with_one_placeholder_per_vector_and_a_paired_control():
    rows, store = built(data_rows())
    for data, row in zip(data_rows(), rows):
        aid = activation_id(data["prompt"])
        assert row["activation_id"] == row["source_id"] == aid and row["source_prompt"] == data["prompt"]
        assert row["source_layer"] in LAYERS
        text = row["prompt"][0]["content"]
        assert text.startswith(f"Layer: {row['source_layer']}\n") and text.endswith(data["question"])
        assert text.count(" ?") == len(store[aid][row["source_layer"]])
        status = parse_epistemic_status(row["completion"])
        assert status.answer == data["answer"] and status.confidence in (50, 90)
        assert (row["readable"], row["fact"], row["kind"]) == (data["readable"], "positive", "mood")
        assert row["control_activation_id"] not in (None, aid) and row["control_activation_id"] in store
    again, _ = built(data_rows())
    assert again == rows  # the same seed, the same draws


def test_a_held_out_file_row_is_asked_as_the_runs_own_splits_asked_it():
    train, test = data_rows(6), data_rows(10)[12:]
    draws = [draw(random.Random(1), LAYERS, [50, 90]) for _ in train]
    new = {"prompt": "a prompt of neither split", "question": "Is it?", "answer": "Yes"}
    in_file = [test[3], train[0], new]
    got = held_out_draws(random.Random(2), lambda rng: draw(rng, LAYERS, [50, 90]), 7, train, draws, test, in_file,
                         from_file=True)
    own = held_out_draws(random.Random(2), lambda rng: draw(rng, LAYERS, [50, 90]), 7, train, draws, test, test,
                         from_file=False)
    assert got[0] == own[3] and got[1] == draws[0]
    assert got[2] == draw(random.Random(f"test_path:7:{new['prompt']}:{new['question']}"), LAYERS, [50, 90])


def test_wildchat_rows_split_by_prompt_with_their_answers_withheld():
    rows = [{"prompt": f"p{i // 3}", "question": f"q{i}", "answer": "x", "question_type": "intent"}
            for i in range(30)]
    train, test = wildchat_split(rows, 0.2)
    assert len({r["prompt"] for r in test}) == 2 and not {r["prompt"] for r in train} & {r["prompt"] for r in test}
    assert len(train) + len(test) == 30 and all(r["answer"] is None and r["kind"] == "intent" for r in train + test)


def test_reserved_prompts_split_the_training_prompts_between_the_stages():
    rows, _ = built(data_rows())
    warmup = stage_rows.prompts_of_stage(rows, 0.25, 5, rl=False)
    rl = stage_rows.prompts_of_stage(rows, 0.25, 5, rl=True)
    assert len({r["source_id"] for r in rl}) == 3
    assert not {r["source_id"] for r in warmup} & {r["source_id"] for r in rl}
    assert len(warmup) + len(rl) == len(rows) and stage_rows.prompts_of_stage(rows, 0, 5, rl=True) == rows
    with pytest.raises(AOCalibError, match="task.rl_rows.reserved_prompts=0.01 leaves the RL stage no training"):
        stage_rows.prompts_of_stage(rows, 0.01, 5, rl=True)


def test_the_rl_rows_keep_every_unstated_row_add_random_vectors_and_name_the_labels_draw():
    rows, store = built(data_rows(20))
    before = set(store)
    switches = OracleRLRowsConfig(none_fraction=0.2, unreadable_fraction=0.5, expected_over_draw=True)
    shaped = stage_rows.rl_rows(rows, switches, store, 3)
    real = [r for r in shaped if not r["activation_id"].startswith(NONE_ID_PREFIX)]
    noise = [r for r in shaped if r["activation_id"].startswith(NONE_ID_PREFIX)]
    unstated = [r for r in rows if r["readable"] is False]
    assert [{k: v for k, v in r.items() if k != "answer_drawn_from"} for r in real if not r["readable"]] == unstated
    assert len(unstated) / len(real) == pytest.approx(0.5, abs=1 / len(real))
    assert len(noise) / len(shaped) == pytest.approx(0.2, abs=1 / len(shaped))
    assert all(r["answer_drawn_from"] == (["Yes", "No"] if r["readable"] is False else []) for r in shaped)
    for row in noise:  # random vectors with the norms of the row's own, added to the store
        own = store[row["activation_id"][len(NONE_ID_PREFIX):]][row["source_layer"]]
        injected = store[row["activation_id"]][row["source_layer"]]
        assert not torch.allclose(injected, own)
        assert torch.allclose(injected.norm(dim=-1), own.norm(dim=-1), rtol=1e-5)
    assert set(store) - before == {r["activation_id"] for r in noise}
    assert stage_rows.rl_rows(rows, switches, store_of(data_rows(20)), 3) == shaped  # seeded by the data seed
    with pytest.raises(AOCalibError, match="no training row is marked unreadable"):
        stage_rows.rl_rows([r for r in rows if r["readable"]], switches, store, 3)


def test_the_warmup_rows_readable_only_keep_the_stated_facts():
    rows, store = built(data_rows())
    switches = OracleWarmupRowsConfig(readable_only=True)
    assert stage_rows.warmup_rows(rows, switches, store, 0, None) == [r for r in rows if r["readable"]]
    assert stage_rows.warmup_shapes_rows(switches) and not stage_rows.warmup_shapes_rows(OracleWarmupRowsConfig())


def test_the_warmup_keeps_coin_flip_rows_with_their_answer_out_of_the_loss():
    rows, store = built(data_rows())
    switches = OracleWarmupRowsConfig(readable_only=True, unstated_tag_only=True, none_fraction=0.2)
    shaped = stage_rows.warmup_rows(rows, switches, store, 4, None)
    noise = [r for r in shaped if r["activation_id"].startswith(NONE_ID_PREFIX)]
    assert len(noise) / len(shaped) == pytest.approx(0.2, abs=1 / len(shaped))
    for row in shaped:
        coin = row["readable"] is False
        assert row["answer_in_loss"] is not coin and row["answer_drawn_from"] == (["Yes", "No"] if coin else [])
    added = ("answer_in_loss", "answer_drawn_from")
    assert [{k: v for k, v in r.items() if k not in added} for r in shaped if r not in noise] == rows


def test_the_warmup_asks_a_share_openly_and_the_unstated_facts_as_not_stated():
    rows, store = built(data_rows(40))
    switches = OracleWarmupRowsConfig(readable_only=True, open_fraction=0.5, open_unstated=True)

    def ask(row, rng):
        return stage_rows.asked_openly(row, rng, switches, store, 3, False)

    shaped = stage_rows.warmup_rows(rows, switches, store, 2, ask)
    assert len(shaped) == len(rows)
    opened = [(b, a) for b, a in zip(rows, shaped) if a["question"] != b["question"]]
    readable = [(b, a) for b, a in opened if b["readable"]]
    assert 0.35 < len(readable) / sum(r["readable"] for r in rows) < 0.65
    for b, a in opened:
        assert a["question"] in OPEN_QUESTIONS["mood"]
        assert a["answer"] == ("positive" if b["readable"] else NOT_STATED)
        assert parse_epistemic_status(a["completion"]).confidence == parse_epistemic_status(b["completion"]).confidence
        assert a["prompt"][0]["content"].count(" ?") == b["prompt"][0]["content"].count(" ?")
    assert {id(b) for b, _ in opened} >= {id(b) for b in rows if not b["readable"]}  # every unstated one


def test_warmup_rows_open_unstated_and_unstated_tag_only_are_refused_together():
    with pytest.raises(ValueError, match="warmup_rows.unstated_tag_only=true: out of range with "
                                         "warmup_rows.open_unstated=true"):
        OracleWarmupRowsConfig(unstated_tag_only=True, open_unstated=True)


@pytest.mark.parametrize("old,new", [("sft_none_fraction", "warmup_rows.none_fraction"),
                                     ("rl_expected_over_draw", "rl_rows.expected_over_draw")])
def test_an_old_row_switch_key_is_refused_at_start_up_naming_its_new_key(old, new, tmp_path):
    result = run_cli("ao_calib.run", "experiment=quickstart", f"task.{old}=0.3", f"hydra.run.dir={tmp_path}",
                     timeout=120)
    assert result.returncode == 2
    assert f"task.{old} has moved: set task.{new} instead" in result.stderr and "Traceback" not in result.stderr
    assert not any(tmp_path.iterdir())  # refused before a run directory is written
