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
    call_string,
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


def test_an_episode_played_from_the_ground_truth_passes_as_bfcl_scores_it():
    """Evaluation's episode loop on a case (its own instances as tools, the AST parser reading each message, the
    later user turns fed one at a time) with a model that writes the ground truth: BFCL's checker passes it, and a
    model that stops one call short fails it."""
    from ao_calib.config.compose import compose_run_config, typed
    from ao_calib.models import loading as models
    from ao_calib.models.config import ModelConfig
    from ao_calib.tools.episodes import play
    from tasks.function_call.bfcl_multi_turn import (
        case_row,
        case_tools,
        episode_steps,
        parsed_calls_turn,
    )

    settings = typed(compose_run_config(["model=tiny_qwen3"]).model, ModelConfig)
    tokenizer = models.load_tokenizer(models.model_source(settings, compose_run_config([]).paths.cache_dir), settings)

    case = next(c for c in load_cases("multi_turn_miss_func") if len(c["question"]) >= 3)
    environment = Environment(case)

    def keyword(text: str) -> str:  # the ground truth's positional arguments named, as a model must write them
        [call] = parse_calls(text)
        return call_string(environment.named(call))

    def model(short: bool):
        def generate(asked):
            out = []
            for row in asked:
                turn = sum(m["role"] == "user" for m in row["prompt"]) - 1
                done = row["prompt"][-1]["role"] == "tool"
                calls = [keyword(t) for t in case["ground_truth"][turn]]
                if short and turn == len(case["ground_truth"]) - 1:
                    calls = calls[:-1]
                out.append("" if done or not calls else "[" + ", ".join(calls) + "]")
            return out

        return generate

    row = case_row(case)
    assert row["prompt"][0]["role"] == "system" and len(row["later_turns"]) == len(case["question"]) - 1
    for short, valid in ((False, True), (True, False)):
        [episode] = play(model(short), [row], lambda r: case_tools(r["case"]), tokenizer, {},
                         parse=parsed_calls_turn)
        steps = episode_steps(episode)
        assert len(steps) == len(case["ground_truth"])
        verdict = bfcl_verdict(case, [[[call_string(c) for c in step] for step in turn] for turn in steps])
        assert verdict["valid"] is valid, verdict.get("error_type")
        assert episode_verdict(case, steps)["valid"] is valid
