"""Multi-turn episodes of the JSON tool task (``tasks.tool_json.episodes``): every generated row's trajectory reaches
its expected answer through the real tools, and an episode's reward pays the right answer, one call to the right
tool, and nothing for the wrong tool, extra calls, calls where none is needed, prose, or a loop cut off before an
answer."""

from __future__ import annotations

import pytest

from tasks.tool_json.episodes import ANSWER, CALL, OUTSIDE, score_episode, trajectory
from tasks.tool_json.generate import generate_rows
from tasks.tool_json.rewards import same_answer

ROW = {"category": "calculator", "tool": "calculator", "tool_args": {"expression": "2 + 3"}, "expected_answer": "5"}
NO_TOOL = {"category": "no_tool", "tool": None, "tool_args": None, "expected_answer": "Leo Tolstoy"}


def call(name: str, **args) -> dict:
    return {"role": "assistant", "content": "",
            "tool_calls": [{"type": "function", "function": {"name": name, "arguments": args}}]}


def said(text: str) -> dict:
    return {"role": "assistant", "content": text}


def result(text: str) -> dict:
    return {"role": "tool", "name": "calculator", "content": text}


def test_every_generated_trajectory_reaches_its_answer_through_the_real_tools():
    rows = generate_rows(40, seed=7)
    for row in rows:
        episode = trajectory(row)
        if row["tool"] is not None:
            assert episode[1]["role"] == "tool" and same_answer(episode[1]["content"].strip(), row["expected_answer"])
        scores = score_episode(episode, row)
        assert scores["answer_correct"] == 1.0 and scores["tool_errors"] == 0.0
        assert scores["episode_reward"] == ANSWER + (CALL if row["tool"] else 0.0)


@pytest.mark.parametrize(("episode", "row", "reward", "parts"), [
    ([call("calculator", expression="2+3"), result("5"), said('{"final": "5"}')], ROW, ANSWER + CALL,
     {"tool_calls": 1, "right_call": 1, "turns": 2, "valid_json": 1}),
    ([call("python", code="print(5)"), result("5\n"), said('{"final": "5"}')], ROW, ANSWER,
     {"right_call": 0}),  # the wrong tool earns no call credit
    ([call("calculator", expression="2+3"), result("5"), call("calculator", expression="2+3"), result("5"),
      said('{"final": "5.0"}')], ROW, ANSWER, {"tool_calls": 2, "right_call": 0}),  # an extra call
    ([said('{"final": "5"}')], ROW, ANSWER, {"called": 0}),  # right without the tool: the answer alone
    ([call("calculator", expression="1+1"), result("2"), said('{"final": "Leo Tolstoy"}')], NO_TOOL, ANSWER,
     {"called": 1, "right_call": 0}),  # a call where none is needed
    ([call("calculator", expression="2+3"), result("5"), said('The answer: {"final": "5"}')], ROW,
     ANSWER + CALL + OUTSIDE, {"valid_json": 0.5}),
    ([call("calculator", expression="2+3"), result("5"), call("calculator", expression="2+3")], ROW, 0.0,
     {"answer_correct": 0, "turns": 2}),  # cut off at the loop's bound: no answer, and two calls
    ([call("calculator", expression="2/0"), result("Error: the calculator evaluates arithmetic only"),
      said('{"final": "5"}')], ROW, ANSWER + CALL, {"tool_errors": 1}),
    ('{"final": "5"}', ROW, ANSWER, {"turns": 1}),  # a single-turn completion as text
    ([said("five")], ROW, OUTSIDE, {"valid_json": 0, "answer_correct": 0}),
])
def test_an_episodes_reward_and_its_parts(episode, row, reward, parts):
    scores = score_episode(episode, row)
    assert scores["episode_reward"] == pytest.approx(reward)
    assert {k: scores[k] for k in parts} == pytest.approx(parts)
