"""BFCL v4 multi-turn, scored as BFCL scores it (``tasks.function_call.bfcl_multi_turn``): on 260 recorded
trajectories (``data/bfcl_v4_multi_turn_fixture``: 52 cases' ground truths and four perturbations of each), the
project's verdict (the calls parsed by its AST parser and run on the case's instances with getattr, never eval;
BFCL's state and response checks after each turn) equals BFCL's own ``multi_turn_checker``, failure type included;
every ground truth passes. And a call the classes cannot take is a result, never an error."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest

pytest.importorskip("bfcl_eval", reason="pip install --no-deps bfcl-eval==2026.3.23")

from tasks.function_call.bfcl_multi_turn import (
    CATEGORIES,
    Environment,
    bfcl_verdict,
    episode_verdict,
    load_cases,
)
from tasks.function_call.parsing import Call, parse_calls

FIXTURE = Path(__file__).resolve().parents[3] / "data" / "bfcl_v4_multi_turn_fixture" / "trajectories.jsonl"


def recorded() -> list[dict]:
    return [json.loads(line) for line in FIXTURE.read_text().splitlines()]


def test_our_verdict_is_bfcls_on_every_recorded_trajectory():
    cases = {case["id"]: case for category in CATEGORIES for case in load_cases(category)}
    outcomes = Counter()
    for row in recorded():
        case = cases[row["id"]]
        parsed = [[[call for text in step for call in parse_calls(text)] for step in turn] for turn in row["turns"]]
        ours, theirs = episode_verdict(case, parsed), bfcl_verdict(case, row["turns"])
        assert ours["valid"] == theirs["valid"], (row["id"], row["kind"], ours, theirs.get("error_type"))
        if not ours["valid"]:
            assert ours["error_type"] == theirs["error_type"], (row["id"], row["kind"], ours, theirs)
        outcomes[row["kind"], ours.get("error_type", "valid")] += 1
    assert sum(outcomes.values()) >= 200
    assert {kind for kind, verdict in outcomes if verdict == "valid"} >= {"ground_truth"}
    assert all(verdict == "valid" for kind, verdict in outcomes if kind == "ground_truth")
    # the perturbations reach each of BFCL's failure types, so the agreement is not all "valid"
    assert {verdict for _, verdict in outcomes} >= {"valid", "multi_turn:empty_turn_model_response",
                                                    "multi_turn:instance_state_mismatch",
                                                    "multi_turn:execution_response_mismatch"}


@pytest.mark.parametrize(("call", "result"), [
    (Call("no_such_function", (("x", 1),)), "Error during execution: name 'no_such_function' is not defined"),
    (Call("cd", (("wrong_kw", "a"),)), "Error during execution: GorillaFileSystem.cd() got an unexpected keyword"),
    (Call("exit", ()), "Error during execution: Function call exit is not allowed."),
    (Call("cd", (("0", "workspace"),)), "Error during execution: GorillaFileSystem.cd() missing 1 required"),
])
def test_a_call_the_classes_cannot_take_is_an_error_result(call, result):
    case = next(c for c in load_cases("multi_turn_base") if "GorillaFileSystem" in c["involved_classes"])
    assert Environment(case).call(call).startswith(result)


def test_a_wrong_turn_count_is_refused_as_bfcl_refuses_it():
    case = load_cases("multi_turn_base")[0]
    assert episode_verdict(case, [])["error_type"] == bfcl_verdict(case, [])["error_type"] \
        == "multi_turn:force_terminated"
