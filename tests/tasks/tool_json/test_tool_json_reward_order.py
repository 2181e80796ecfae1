"""Every shipped JSON tool-calling reward, and every shipped mix of them (conf/reward/), pays the right answer the
most, and strictly more than each way of getting it wrong: no answer (``[]``, an empty answer, free text), the
right call twice, a call to a tool that does not exist, or the right tool with a wrong argument (a wrong direct
answer). A component is blind to the mistakes outside what it reads (the format reward to the argument, say), and
there it may tie the right answer but never beat it; every mix sees every mistake."""

from __future__ import annotations

import json

import pytest

from ao_calib.calibration import CalibrationConfig
from ao_calib_tasks.tool_json.rewards import REWARD_FUNCTIONS, make_calibrated_args
from tests.helpers.reward_order import shipped_mixes, with_mixes

CALIBRATED = "calibrated_args"
COMPONENTS = set(REWARD_FUNCTIONS) | {CALIBRATED}  # every reward a tool_json run can weigh


def call(tool: str, key: str, value: str) -> str:
    return json.dumps({"tool": tool, "args": {key: value}})


def final(value: str) -> str:
    return json.dumps({"final": value})


# One row per expected tool: (row, the right answer, a call to a tool that does not exist, a wrong argument).
CASES = {
    "calculator": ({"category": "calculator", "tool": "calculator", "tool_args": {"expression": "12*7"},
                    "expected_answer": "84"},
                   call("calculator", "expression", "12*7"), call("search", "query", "12 times 7"),
                   call("calculator", "expression", "12*8")),
    "python": ({"category": "python_exec", "tool": "python", "tool_args": {"code": "print('hello'[::-1])"},
                "expected_answer": "olleh"},
               call("python", "code", "print('hello'[::-1])"), call("shell", "command", "rev <<< hello"),
               call("python", "code", "print('hello')")),
    "direct answer": ({"category": "no_tool", "tool": None, "tool_args": None, "expected_answer": "Paris"},
                      final("Paris"), call("search", "query", "capital of France"), final("Lyon")),
}

# What each component does not read, so cannot tell from the right answer.
BLIND = {
    "format_reward": {"wrong argument"},  # the shape only
    "tool_reward": {"wrong argument"},  # the tool chosen only
    "length_penalty": {"unknown tool", "wrong argument"},  # whether the one object stands alone only
}


def mistakes(right: str, unknown_tool: str, wrong_argument: str) -> dict[str, str]:
    return {
        "empty list": "[]",
        "empty answer": "",
        "free text": "Let me think: the answer should be easy to work out from the question.",
        "repeated call": f"{right}\n{right}",
        "unknown tool": unknown_tool,
        "wrong argument": wrong_argument,
    }


def reward_scores(texts: list[str], row: dict) -> dict[str, list[float]]:
    """Every reward the task trains on, with the columns as TRL passes them (tool_args as JSON text)."""
    n = len(texts)
    columns = {k: [json.dumps(row["tool_args"]) if k == "tool_args" else row[k]] * n
               for k in ("category", "tool", "tool_args", "expected_answer")}
    scores = {name: fn(texts, **columns) for name, fn in REWARD_FUNCTIONS.items()}
    tagged = [f"[epistemic status: 80] {t}" for t in texts]  # the calibrated reward reads tagged answers
    scores[CALIBRATED] = make_calibrated_args(CalibrationConfig(lam=0.5))(tagged, **columns)
    return scores


def test_every_shipped_mix_is_covered():
    assert {name.split("[")[0] for name in shipped_mixes(COMPONENTS)} >= {"tool_json", "calibrated_tool_json"}


@pytest.mark.parametrize("case", CASES)
def test_the_right_answer_earns_strictly_more_than_any_mistake(case):
    row, right, unknown_tool, wrong_argument = CASES[case]
    wrong = mistakes(right, unknown_tool, wrong_argument)
    scores = reward_scores([right, *wrong.values()], row)
    rewards = with_mixes(scores, COMPONENTS)
    for name, values in rewards.items():
        best, others = values[0], dict(zip(wrong, values[1:]))
        assert best == max(values), (name, case, values)
        for kind, value in others.items():
            if kind in BLIND.get(name, ()):
                continue
            assert value < best, f"{name} ({case}): {kind} earns {value}, the right answer {best}"


def test_any_second_object_is_a_second_call_but_braces_in_prose_are_not():
    row, right, _, _ = CASES["calculator"]
    texts = [f'{right}\nThen: {final("84")}', f"{right} (the product, {{not}} a sum)"]
    scores = reward_scores(texts, row)
    assert scores["tool_reward"] == [-0.5, 0.5] and scores["args_reward"] == [0.0, 1.0]
    assert scores["length_penalty"] == [-0.2, -0.2] and scores["format_reward"] == [0.0, 0.0]
