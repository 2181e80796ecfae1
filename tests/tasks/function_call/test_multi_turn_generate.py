"""The generator of multi-turn training cases over BFCL's classes (``tasks.function_call.multi_turn_generate``):
seeded, every case's ground truth plays without an error and passes BFCL's own checker against itself, the splits
are disjoint, and no BFCL multi-turn case, question or ground truth appears in what it writes."""

from __future__ import annotations

import json

import pytest

pytest.importorskip("bfcl_eval", reason="pip install --no-deps bfcl-eval==2026.3.23")

from tasks.function_call.bfcl_multi_turn import (
    CATEGORIES,
    bfcl_verdict,
    episode_verdict,
    load_cases,
)
from tasks.function_call.multi_turn_generate import generate_cases, split_cases
from tasks.function_call.parsing import parse_calls


def test_seeded_and_every_ground_truth_passes_bfcls_checker():
    cases = generate_cases(120, seed=3)
    assert cases == generate_cases(120, seed=3) and cases != generate_cases(120, seed=4)
    assert all(2 <= len(c["question"]) == len(c["ground_truth"]) for c in cases)
    for case in cases:
        turns = [[parse_calls(text) for text in turn] for turn in case["ground_truth"]]
        assert episode_verdict(case, turns) == {"valid": True}, case["id"]
    for case in cases[:20]:  # and BFCL's own checker, which runs the calls its way
        assert bfcl_verdict(case, [[[text] for text in turn] for turn in case["ground_truth"]])["valid"], case["id"]


def test_the_splits_are_disjoint_cases():
    cases = generate_cases(100, seed=0)
    train, validation, test = split_cases(cases, 0.2, 0.1, seed=0)
    ids = [{c["id"] for c in part} for part in (train, validation, test)]
    assert [len(i) for i in ids] == [70, 10, 20] and not (ids[0] & ids[1] or ids[0] & ids[2] or ids[1] & ids[2])


def test_no_bfcl_case_question_or_ground_truth_is_generated():
    bfcl = [case for category in CATEGORIES for case in load_cases(category)]
    questions = {m["content"] for case in bfcl for turn in case["question"] for m in turn}
    truths = {json.dumps(turn) for case in bfcl for turn in case["ground_truth"] if turn}
    configs = {json.dumps(case["initial_config"], sort_keys=True) for case in bfcl}
    for seed in (0, 1, 2):
        for case in generate_cases(300, seed=seed):
            assert not {m["content"] for turn in case["question"] for m in turn} & questions, case["id"]
            assert not {json.dumps(turn) for turn in case["ground_truth"]} & truths, case["id"]
            assert json.dumps(case["initial_config"], sort_keys=True) not in configs, case["id"]
