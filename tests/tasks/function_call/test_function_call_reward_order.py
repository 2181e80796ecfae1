"""Every shipped function-calling reward, and every shipped mix of them (conf/reward/), pays the right call the
most, and strictly more than each way of not making it: no call (``[]``, an empty answer, free text), the right
call twice, or a call to a function the prompt does not list; so too where the call takes no arguments, where no
call must not pass for having every argument right. On a case that expects no call (BFCL's irrelevance), it is the
other way round: no call is right and any call earns less."""

from __future__ import annotations

import json

import pytest

from ao_calib.calibration import CalibrationConfig
from ao_calib_tasks.function_call.bfcl_rewards import make_rewards as make_bfcl_rewards
from ao_calib_tasks.function_call.rewards import REWARD_FUNCTIONS, make_calibrated_overall
from tests.helpers.reward_order import shipped_mixes, with_mixes

# Every reward a function-calling run can weigh.
COMPONENTS = set(REWARD_FUNCTIONS) | set(make_bfcl_rewards(True)) | {"calibrated_overall"}

# Two cases in both output formats, each with two listed functions and one expected call: one with arguments,
# one whose call takes none.
NO_CALL = {
    "empty list": "[]",
    "empty answer": "",
    "free text": "The weather in Paris is probably mild; I would look it up for you.",
}
RIGHT = 'get_weather(city="Paris", units="celsius")'
RIGHT_NO_ARGS = "get_time()"
CASES = {
    "arguments": (["get_weather", "convert_currency"], RIGHT, 'get_forecast(city="Paris", units="celsius")'),
    "no arguments": (["get_time", "get_weather"], RIGHT_NO_ARGS, "get_clock()"),
}


def wrong_answers(right: str, unlisted: str, bfcl: bool) -> dict[str, str]:
    """Every way of not making the right call, in the default format or BFCL's (a bracketed list)."""
    if bfcl:
        return {**NO_CALL, "repeated call": f"[{right}, {right}]", "unlisted function": f"[{unlisted}]"}
    return {**NO_CALL, "repeated call": f"{right}\n{right}", "unlisted function": unlisted}


BFCL_FUNCTIONS = [
    {"name": "get_weather", "description": "Current weather.", "parameters": {"type": "dict", "properties": {
        "city": {"type": "string", "description": "City."},
        "units": {"type": "string", "enum": ["celsius", "fahrenheit"], "description": "Units."}},
        "required": ["city"]}},
    {"name": "convert_currency", "description": "Converts money.", "parameters": {"type": "dict", "properties": {
        "amount": {"type": "float", "description": "Amount."}, "to": {"type": "string", "description": "Code."}},
        "required": ["amount", "to"]}},
    {"name": "get_time", "description": "The current time.", "parameters": {"type": "dict", "properties": {},
                                                                             "required": []}},
]
BFCL_TRUTH = [{"get_weather": {"city": ["Paris"], "units": ["celsius", ""]}}]
BFCL_TRUTHS = {"arguments": BFCL_TRUTH, "no arguments": [{"get_time": {}}]}
BFCL_RIGHT = f"[{RIGHT}]"


def default_scores(texts: list[str], answer: str = RIGHT, listed: list[str] = CASES["arguments"][0]
                   ) -> dict[str, list[float]]:
    n = len(texts)
    scores = {name: fn(texts, [answer] * n, possible_boxed_answers=[listed] * n)
              for name, fn in REWARD_FUNCTIONS.items()}
    tagged = [f"[epistemic status: 80] {t}" for t in texts]  # the calibrated reward reads tagged answers
    scores["calibrated_overall"] = make_calibrated_overall(CalibrationConfig(lam=0.5))(completions=tagged,
                                                                                   answer=[answer] * n)
    return scores


def bfcl_scores(texts: list[str], truth=BFCL_TRUTH) -> dict[str, list[float]]:
    n = len(texts)
    return {name: fn(texts, [json.dumps(BFCL_FUNCTIONS)] * n, [json.dumps(truth)] * n)
            for name, fn in make_bfcl_rewards(strict_format=True).items()}


def test_every_shipped_mix_is_covered():
    names = {name.split("[")[0] for name in shipped_mixes(COMPONENTS)}
    assert {"function_call_balanced", "function_call_progressive", "function_call_strict", "function_call_bfcl",
            "calibrated_function_call"} <= names


@pytest.mark.parametrize("case", CASES)
@pytest.mark.parametrize("fmt", ["default", "bfcl"])
def test_the_right_call_earns_strictly_more_than_any_way_of_not_making_it(fmt, case):
    listed, right, unlisted = CASES[case]
    wrong = wrong_answers(right, unlisted, bfcl=fmt == "bfcl")
    if fmt == "default":
        texts = [right, *wrong.values()]
        scores = default_scores(texts, answer=right, listed=listed)
    else:
        texts = [f"[{right}]", *wrong.values()]
        scores = bfcl_scores(texts, truth=BFCL_TRUTHS[case])
    rewards = with_mixes(scores, COMPONENTS)
    assert len(rewards) > len(scores)  # the mixes of this format are there
    for name, values in rewards.items():
        best, others = values[0], dict(zip(wrong, values[1:]))
        assert best == max(values), (name, values)
        for kind, value in others.items():
            assert value < best, f"{name} ({case}): {kind} earns {value}, the right call {best}"


def test_on_an_irrelevance_case_no_call_is_right_and_any_call_earns_less():
    no_call = ["[]", "", "None of the functions can tell the time."]
    calls = [BFCL_RIGHT, '[convert_currency(amount=1.0, to="EUR")]']
    scores = bfcl_scores(no_call + calls, truth=[])
    for name, values in with_mixes(scores, COMPONENTS).items():
        assert min(values[:3]) > max(values[3:]), (name, values)
