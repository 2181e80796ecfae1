"""The BFCL checker's behaviour pinned on hand-made cases (BFCL's semantics; where we differ, said so)."""

import pytest

from ao_calib_tasks.function_call.bfcl_checker import (UndecodableError, call_credit, decode, function_credit,
                                                       param_credit, score_text)

WEATHER = {"name": "get_weather", "description": "Weather in a city.", "parameters": {"type": "dict", "properties": {
    "city": {"type": "string", "description": "City."},
    "days": {"type": "integer", "description": "Days ahead."},
    "unit": {"type": "string", "description": "celsius or fahrenheit."},
    "scale": {"type": "float", "description": "A factor."},
    "point": {"type": "tuple", "items": {"type": "integer"}, "description": "x, y."},
    "tags": {"type": "array", "items": {"type": "string"}, "description": "Tags."},
    "flag": {"type": "boolean", "description": "A flag."}}, "required": ["city"]}}
FUNCTIONS = [WEATHER]
TRUTH = [{"get_weather": {"city": ["New York City", "NYC"], "days": [3], "unit": ["celsius", ""],
                          "scale": [2.0, ""], "point": [[1, 2], ""], "tags": [["Rain", "wind"], ""],
                          "flag": [True, ""]}}]


def valid(text, truth=TRUTH, functions=FUNCTIONS, **kw):
    return score_text(text, functions, truth, **kw).valid


@pytest.mark.parametrize("text", [
    '[get_weather(city="New York City", days=3)]',
    'get_weather(city="NYC", days=3)',                       # alternative value; brackets added as BFCL does
    "[get_weather(city='new york city', days=3)]",            # case, spaces, quotes standardised
    '[get_weather(city="New-York City.", days=3)]',           # punctuation ,./-_*^ ignored
    '[get_weather(city="NYC", days=3, unit="Celsius")]',
    '[get_weather(city="NYC", days=3, scale=2)]',             # int for float: Python would convert it
    '[get_weather(city="NYC", days=3, point=(1, 2))]',        # tuple for tuple
    '[get_weather(city="NYC", days=3, tags=["rain", "Wind"])]',
    '```\n[get_weather(city="NYC", days=3)]\n```',           # a bare fence is stripped by BFCL's decoder
    '[get_weather("ignored", city="NYC", days=3)]',           # positional arguments dropped, as in BFCL
])
def test_accepted(text):
    assert valid(text)


@pytest.mark.parametrize("text,error", [
    ('[get_weather(city="Boston", days=3)]', "value_error"),
    ('[get_weather(city="NYC")]', "missing_optional"),                 # days has no "" among its values
    ('[get_weather(days=3)]', "missing_required"),
    ('[get_weather(city="NYC", days=3.0)]', "type_error"),              # float where the schema says integer
    ('[get_weather(city="NYC", days="3")]', "type_error"),
    ('[get_weather(city="NYC", days=3, flag=1)]', "type_error"),        # int is not a boolean
    ('[get_weather(city="NYC", days=3, tags=("rain", "wind"))]', "type_error"),  # tuple where it says array
    ('[get_weather(city="NYC", days=3, tags=["wind", "rain"])]', "value_error"),  # list order matters
    ('[get_weather(city="NYC", days=3, extra=1)]', "unexpected_param"),
    ('[get_forecast(city="NYC", days=3)]', "wrong_func_name"),
    ('[get_weather(city="NYC", days=3), get_weather(city="NYC", days=3)]', "wrong_count"),
    ('Sure! [get_weather(city="NYC", days=3)]', "decoder_failed"),       # prose around the call
    ('```python\n[get_weather(city="NYC", days=3)]\n```', "decoder_failed"),  # fence with a language tag
    ('get_weather(city="NYC", days=3)\nget_weather(city="NYC", days=3)', "decoder_failed"),
    ('[get_weather(city=__import__("os").getcwd(), days=3)]', "value_error"),  # read as text, never run
])
def test_rejected(text, error):
    verdict = score_text(text, FUNCTIONS, TRUTH)
    assert not verdict.valid and verdict.error_type == error, verdict


def test_lenient_format_finds_the_call_in_prose_and_fences():
    for text in ['Sure! Here it is:\n[get_weather(city="NYC", days=3)]',
                 'Call:\n```python\n[get_weather(city="NYC", days=3)]\n```\nDone.']:
        assert not valid(text)
        assert valid(text, strict_format=False)


PAIR_TRUTH = [{"f": {"a": [1, 2]}}, {"f": {"a": [1]}}]
PAIR_FUNCTIONS = [{"name": "f", "description": "", "parameters": {"type": "dict", "properties": {
    "a": {"type": "integer", "description": ""}}, "required": ["a"]}}]


def test_parallel_calls_match_in_any_order_with_optimal_matching():
    # BFCL's first-fit matching gives f(a=1) to the first expected call and then rejects this correct answer
    assert valid("[f(a=1), f(a=2)]", PAIR_TRUTH, PAIR_FUNCTIONS)
    assert valid("[f(a=2), f(a=1)]", PAIR_TRUTH, PAIR_FUNCTIONS)
    assert not valid("[f(a=2), f(a=2)]", PAIR_TRUTH, PAIR_FUNCTIONS)


def test_dict_and_list_of_dict_values():
    functions = [{"name": "g", "description": "", "parameters": {"type": "dict", "properties": {
        "info": {"type": "dict", "description": ""},
        "rows": {"type": "array", "items": {"type": "dict"}, "description": ""}}, "required": ["info"]}}]
    truth = [{"g": {"info": [{"name": ["John Doe"], "age": [30, ""]}], "rows": [[{"k": ["v"]}], ""]}}]
    assert valid("[g(info={'name': 'john doe'})]", truth, functions)
    assert valid("[g(info={'name': 'John Doe', 'age': 30}, rows=[{'k': 'V'}])]", truth, functions)
    assert not valid("[g(info={'name': 'John Doe', 'zip': 1})]", truth, functions)
    assert not valid("[g(info={'age': 30})]", truth, functions)


def test_decode_never_evaluates_and_computes_only_number_arithmetic():
    assert decode("[f(a=2*3, b=-1.5, c=x, d=g(1))]") == [{"f": {"a": 6, "b": -1.5, "c": "x", "d": "g(1)"}}]
    for text in ["[f(a=lambda: 1)]", "[f(a={1, 2})]", "[f(a=10**10**10)]", "[x.y[0](a=1)]", "f(**k)", "[1, 2]"]:
        with pytest.raises(UndecodableError):
            decode(text)


def test_partial_credit_scores_against_the_best_matching_acceptable_set():
    truth = [{"f": {"a": [1, 2]}}, {"h": {"b": ["x"], "c": [1, ""]}}]
    functions = PAIR_FUNCTIONS + [{"name": "h", "description": "", "parameters": {"type": "dict", "properties": {
        "b": {"type": "string", "description": ""}, "c": {"type": "integer", "description": ""}}, "required": []}}]
    assert call_credit(functions, decode("[h(b='X'), f(a=2)]"), truth) == 1.0
    assert call_credit(functions, decode("[h(b='y'), f(a=2)]"), truth) == 0.5
    assert param_credit(functions, decode("[h(b='X', c=5), f(a=2)]"), truth) == pytest.approx((1 + 0.5) / 2)
    assert param_credit(functions, decode("[f(a=2)]"), truth) == pytest.approx(0.5)
    # the right functions with wrong values: no call or parameter credit, full function credit
    assert call_credit(functions, decode("[h(b='y'), f(a=9)]"), truth) == 0.0
    assert function_credit(decode("[h(b='y'), f(a=9)]"), truth) == 1.0
    assert function_credit(decode("[f(a=9), f(a=1), g(x=1)]"), truth) == pytest.approx(1 / 3)
    assert function_credit([], truth) == 0.0
