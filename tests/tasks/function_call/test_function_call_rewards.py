"""Parser and reward edge cases for the Python-style function-calling task.

Expected F1 values are worked out by hand in the comments:
F1 = 2·|P∩E| / (|P| + |E|) over multisets.
"""

from __future__ import annotations


import pytest

from ao_calib_tasks.function_call.parsing import Call, completion_text, parse_calls
from ao_calib_tasks.function_call.rewards import (
    REWARD_FUNCTIONS,
    canonical_value,
    score_completion,
    tool_call_exact,
    tool_call_function,
    tool_call_overall,
    tool_call_params,
    tool_call_parseable,
)

FACT = "calculate_factorial(n=5)"


def scores(completion, answer):
    return score_completion(completion, answer)


def approx(d):
    return {k: pytest.approx(v) for k, v in d.items()}


def all_five(parseable, function, params, exact):
    return approx({
        "tool_call_parseable": parseable,
        "tool_call_function": function,
        "tool_call_params": params,
        "tool_call_exact": exact,
        "tool_call_overall": 0.4 * function + 0.4 * params + 0.2 * exact,
    })


# ---------------------------------------------------------------- parser

def test_parse_keyword_and_positional_args():
    # positional arguments are kept by position under "0", "1", ...
    assert parse_calls("f(5, 'a', k=[1, 2])") == [Call("f", (("0", 5), ("1", "a"), ("k", [1, 2])))]


def test_parse_dotted_name_semicolon_fence_and_multiline():
    assert parse_calls("math.sqrt(x=4);") == [Call("math.sqrt", (("x", 4),))]
    assert parse_calls("```python\nf(a=1)\n```") == [Call("f", (("a", 1),))]
    assert parse_calls("f(\n  a=1,\n  b=-2.5)") == [Call("f", (("a", 1), ("b", -2.5)))]
    assert parse_calls("```\ng(\n  a={'k': (1, None)})\n```") == [Call("g", (("a", {"k": (1, None)}),))]


@pytest.mark.parametrize("text", [
    "The answer is 120.",
    "f(g(1))",              # nested call
    "f(x=y)",               # non-literal argument
    "f(**{'a': 1})",        # **kwargs
    "f(*[1, 2])",           # *args
    "x = f(a=1)",           # assignment
    "f(a=1, a=2)",          # repeated keyword (Python rejects it too)
    "f(a=1)(b=2)",          # callee is a call
    "obj[0](a=1)",          # callee is a subscript
    "lambda: f(a=1)",
    "f(a=1",                # unbalanced
    "",
])
def test_parse_rejects(text):
    assert parse_calls(text) == []


def test_completion_text_forms():
    assert completion_text("x") == "x"
    assert completion_text([{"role": "assistant", "content": FACT}]) == FACT
    assert completion_text([{"role": "assistant", "content": [{"type": "text", "text": FACT}]}]) == FACT
    assert completion_text(None) == ""


# ---------------------------------------------------------------- rewards

def test_prose_only():
    # no predicted call, one expected: every F1 has exactly one empty side -> 0
    assert scores("I would compute the factorial of five.", FACT) == all_five(0, 0, 0, 0)


def test_prose_around_call():
    text = "Sure! Here is the call:\ncalculate_factorial(n=5)\nHope that helps."
    assert scores(text, FACT) == all_five(1, 1, 1, 1)


def test_multiple_calls_partial():
    answer = "calculate_factorial(n=5)\ncalculate_factorial(n=7)\ncalculate_factorial(n=10)"
    pred = "calculate_factorial(n=5)\ncalculate_factorial(n=7)"
    # names: P={fact:2}, E={fact:3}, overlap 2 -> 2*2/5 = 0.8; triples likewise 0.8; not exact
    # overall = 0.4*0.8 + 0.4*0.8 + 0 = 0.64; format credit: 2 of the 3 expected calls made -> 2/3
    s = scores(pred, answer)
    assert s == all_five(2 / 3, 0.8, 0.8, 0)
    assert s["tool_call_overall"] == pytest.approx(0.64)


def test_call_order_and_argument_order_ignored():
    answer = 'convert_currency(amount=10, from_currency="USD", to_currency="EUR")\nget_weather(city="Paris")'
    pred = "get_weather(city='Paris')\nconvert_currency(to_currency='EUR', amount=10.0, from_currency='USD')"
    assert scores(pred, answer) == all_five(1, 1, 1, 1)


def test_extra_argument():
    # triples: P has 2, E has 1, overlap 1 -> 2*1/3 = 2/3; overall = 0.4 + 0.4*2/3 = 0.6667
    s = scores('get_weather(city="Paris", units="celsius")', 'get_weather(city="Paris")')
    assert s == all_five(1, 1, 2 / 3, 0)
    assert s["tool_call_overall"] == pytest.approx(0.4 + 0.8 / 3)


def test_missing_argument():
    # triples: P has 2, E has 3, overlap 2 -> 4/5 = 0.8; overall = 0.4 + 0.32 = 0.72
    s = scores('convert_currency(amount=10, from_currency="USD")',
               'convert_currency(amount=10, from_currency="USD", to_currency="EUR")')
    assert s == all_five(1, 1, 0.8, 0)
    assert s["tool_call_overall"] == pytest.approx(0.72)


def test_int_equals_float():
    assert scores("calculate_factorial(n=5.0)", FACT) == all_five(1, 1, 1, 1)
    assert scores("f(x=[1, 2.0])", "f(x=(1.0, 2))") == all_five(1, 1, 1, 1)  # list == tuple, by value


def test_bool_is_not_int():
    # descending=1 vs descending=True: triples P={numbers, desc:1}, E={numbers, desc:True},
    # overlap 1 -> 2*1/4 = 0.5; not exact; overall = 0.4 + 0.2 = 0.6
    s = scores("sort_list(numbers=[3, 1], descending=1)", "sort_list(numbers=[3, 1], descending=True)")
    assert s == all_five(1, 1, 0.5, 0)
    assert scores("f(x=[True])", "f(x=[1])")["tool_call_exact"] == 0.0
    assert scores("f(x=0)", "f(x=False)")["tool_call_exact"] == 0.0


def test_nested_values_compare_recursively():
    assert scores("f(d={'b': [1, 2], 'a': 1.0})", "f(d={'a': 1, 'b': (1, 2)})")["tool_call_exact"] == 1.0
    assert scores("f(d={'a': '1'})", "f(d={'a': 1})")["tool_call_exact"] == 0.0  # strings are exact
    assert canonical_value(10**20) != canonical_value(10**20 + 1)  # no float rounding of big ints


def test_nested_call_is_no_call():
    assert scores("calculate_factorial(n=abs(5))", FACT) == all_five(0, 0, 0, 0)


def test_non_literal_argument_is_no_call():
    assert scores("calculate_factorial(n=five)", FACT) == all_five(0, 0, 0, 0)


def test_positional_args_differ_from_keywords():
    # same name -> function 1; triple keys "0" vs "n" -> params 0; overall 0.4
    assert scores("calculate_factorial(5)", FACT) == all_five(1, 1, 0, 0)
    assert scores("calculate_factorial(5)", "calculate_factorial(5)") == all_five(1, 1, 1, 1)


def test_chat_message_completions():
    completions = [[{"role": "assistant", "content": FACT}], [{"role": "assistant", "content": "no idea"}]]
    assert tool_call_exact(completions, [FACT, FACT]) == [1.0, 0.0]
    assert tool_call_parseable(completions, [FACT, FACT]) == [1.0, 0.0]


def test_both_empty():
    # neither side has a call: every F1 is 1 by definition, multisets equal -> exact 1; no call where none is
    # expected is the right format too
    assert scores("nothing to call here", "") == all_five(1, 1, 1, 1)
    assert scores(FACT, "") == all_five(0, 0, 0, 0)  # a call where none is expected earns nothing


def test_a_call_without_arguments():
    # the call's argument facts are the one triple (get_time, None, None); no call lacks it
    assert scores("get_time()", "get_time()") == all_five(1, 1, 1, 1)
    for no_call in ("", "[]", "It is noon."):
        assert scores(no_call, "get_time()") == all_five(0, 0, 0, 0)
    # twice: 2*1/3 for names and facts, format 1/2; an argument it does not take: the name only
    assert scores("get_time()\nget_time()", "get_time()") == all_five(1 / 2, 2 / 3, 2 / 3, 0)
    assert scores('get_time(zone="UTC")', "get_time()") == all_five(1, 1, 0, 0)
    # leaving out a zero-argument call costs parameter credit like leaving out any other: 2*1/(1+2)
    assert scores(FACT, f"{FACT}\nget_time()") == all_five(1 / 2, 2 / 3, 2 / 3, 0)


def test_duplicated_calls_are_a_multiset():
    # P={fact(5):2}, E={fact(5):1}: overlap 1 -> 2*1/3 = 2/3 for names and triples; not exact
    # overall = 0.4*2/3 + 0.4*2/3 = 0.5333
    # format credit: 1 expected call, 2 made -> 1/2
    s = scores(f"{FACT}\n{FACT}", FACT)
    assert s == all_five(1 / 2, 2 / 3, 2 / 3, 0)
    assert s["tool_call_overall"] == pytest.approx(1.6 / 3)


def test_wrong_function_name():
    # names disjoint -> 0; triples carry the name -> 0; overall 0
    assert scores("calculate_fact(n=5)", FACT) == all_five(1, 0, 0, 0)


def test_mixed_right_and_wrong_functions():
    # P names {weather, tip}, E names {weather, fact}: overlap 1 -> 2/4 = 0.5
    # triples P {(w,city,Paris),(tip,bill,10)}, E {(w,city,Paris),(fact,n,5)}: 0.5
    # overall = 0.2 + 0.2 + 0 = 0.4
    s = scores('get_weather(city="Paris")\ncalculate_tip(bill_amount=10)', f'get_weather(city="Paris")\n{FACT}')
    assert s == all_five(1, 0.5, 0.5, 0)
    assert s["tool_call_overall"] == pytest.approx(0.4)


def test_overall_is_weighted_sum_in_batch():
    completions = [FACT, "calculate_factorial(n=6)", "nope", "calculate_factorial(n=5, m=1)"]
    answers = [FACT] * 4
    f = tool_call_function(completions, answers)
    p = tool_call_params(completions, answers)
    e = tool_call_exact(completions, answers)
    o = tool_call_overall(completions, answers)
    assert o == pytest.approx([0.4 * a + 0.4 * b + 0.2 * c for a, b, c in zip(f, p, e)])
    # row 2: function 1, params 0, exact 0 -> 0.4; row 4: params 2*1/3 -> 0.4 + 0.2667
    assert o == pytest.approx([1.0, 0.4, 0.0, 0.4 + 0.8 / 3])


def test_trl_signature_ignores_extra_kwargs():
    out = tool_call_overall(completions=[FACT], answer=[FACT], prompts=["p"], trainer_state=None, completion_ids=[[1]])
    assert out == [1.0]
    assert set(REWARD_FUNCTIONS) == {
        "tool_call_parseable", "tool_call_function", "tool_call_params", "tool_call_exact", "tool_call_overall"}
    with pytest.raises(ValueError):
        tool_call_exact([FACT, FACT], [FACT])


def test_dangerous_text_is_never_executed(tmp_path):
    target = tmp_path / "pwned"
    evil = [
        f"__import__('os').system('touch {target}')",
        f"exec(\"open('{target}', 'w').write('x')\")",  # a real call shape: parsed as data, never run
        f"os.system('touch {target}')",
    ]
    assert parse_calls(evil[0]) == []
    assert parse_calls(evil[1]) == [Call("exec", (("0", f"open('{target}', 'w').write('x')"),))]
    assert parse_calls(evil[2]) == [Call("os.system", (("0", f"touch {target}"),))]
    for fn in REWARD_FUNCTIONS.values():
        fn(evil, [FACT] * len(evil))
    assert not target.exists()


@pytest.mark.parametrize("text", [
    "word " * 20_000,                          # 100 kB of prose
    "(" * 100_000,                             # deeply nested brackets
    "f(x=" + "[" * 50_000 + "]" * 50_000 + ")",
    "f(x=" + "1+" * 50_000 + "1)",             # a long expression chain
    "calculate_factorial(n=5)\n" * 4_000,      # very many calls (truncated at 20,000 chars)
    "f(\n" + "a=1,\n" * 25_000 + ")",          # one huge multi-line call
])
def test_large_inputs_are_scored_without_error(text):
    assert len(text) >= 100_000
    s = score_completion(text + " ", FACT)  # the trailing space dodges the cache
    assert set(s) == set(all_five(0, 0, 0, 0)) and all(0.0 <= v <= 1.0 for v in s.values())
    assert s["tool_call_exact"] == float(text.startswith(FACT) and text.count(FACT) == 1)


def test_calibrated_overall_uses_the_task_score_as_informativeness():
    from ao_calib_tasks.function_call.rewards import make_calibrated_overall, score_completion

    from ao_calib.calibration import CalibrationConfig

    reward = make_calibrated_overall(CalibrationConfig(lam=0.5, untagged_penalty=0.5))
    answer = "calculate_factorial(n=5)"
    right = "[epistemic status: 90] calculate_factorial(n=5)"
    wrong = "[epistemic status: 90] reverse_words(text=\"hi\")"
    untagged = "calculate_factorial(n=5)"
    assert score_completion(right, answer)["tool_call_exact"] == 1.0  # the tag is set aside before parsing
    assert reward(completions=[right, wrong, untagged], answer=answer) == pytest.approx([1 - 0.5 * 0.1**2, 0 - 0.5 * 0.9**2, 1 - 0.5 * 0.5**2 - 0.5])
