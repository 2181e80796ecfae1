"""Rewards, completion parsing and the safe evaluator of the JSON tool-calling task (task=tool_json)."""

from __future__ import annotations

import json
import os
import resource
from pathlib import Path

import pytest

from ao_calib_tasks.tool_json.parsing import parse_output
from ao_calib_tasks.tool_json.rewards import (
    REWARD_FUNCTIONS,
    args_reward,
    format_reward,
    length_penalty,
    normalize_answer,
    parse_number,
    same_answer,
    same_program,
    score_completion,
    tool_reward,
)
from ao_calib_tasks.tool_json.safe_eval import MAX_EXPRESSION_CHARS, safe_eval

CALC = {"category": "calculator", "tool": "calculator", "tool_args": {"expression": "2*(3+4)"},
        "expected_answer": "14"}
PY = {"category": "python_exec", "tool": "python", "tool_args": {"code": "print('hello'[::-1])"},
      "expected_answer": "olleh"}
FINAL = {"category": "no_tool", "tool": None, "tool_args": None, "expected_answer": "Paris"}


def call(tool: str, key: str, value) -> str:
    return json.dumps({"tool": tool, "args": {key: value}})


def final(value) -> str:
    return json.dumps({"final": value})


def scores(text, row) -> dict[str, float]:
    return score_completion(text, row)


def batch(fn, completions, rows):
    """Call a TRL-style reward with dataset columns as keyword lists."""
    return fn(completions, **{k: [r[k] for r in rows] for k in ("category", "tool", "tool_args", "expected_answer")})


# ----------------------------------------------------------------------------------------- format


@pytest.mark.parametrize("text", [
    final("Paris"),
    '  {"final": "Paris"}\n',
    '{"final": ""}',
    call("calculator", "expression", "1+1"),
    call("python", "code", "print(1)"),
    '{"args": {"code": "print(1)"}, "tool": "python"}',  # key order is free
    '{\n  "tool": "calculator",\n  "args": {"expression": "2 * 3"}\n}',  # so is layout
])
def test_format_reward_accepts_the_three_shapes(text):
    assert format_reward([text]) == [1.0]
    assert parse_output(text).valid_json


@pytest.mark.parametrize("text,valid_json", [
    ('{"final": 14}', True),  # number, not a string
    ('{"final": null}', True),
    ('{"final": "x", "note": "y"}', True),  # extra key
    ('{"final": "x", "tool": "calculator"}', True),
    ('{"tool": "calculator"}', True),  # no args
    ('{"tool": "calculator", "args": {"expression": "1+1"}, "final": "2"}', True),
    ('{"tool": "calculator", "args": {"code": "1+1"}}', True),  # wrong arg key for the tool
    ('{"tool": "python", "args": {"expression": "1+1"}}', True),
    ('{"tool": "calculator", "args": {"expression": 2}}', True),  # wrong arg type
    ('{"tool": "calculator", "args": {"expression": "1", "precision": 2}}', True),  # extra arg
    ('{"tool": "calculator", "args": "1+1"}', True),
    ('{"tool": "search", "args": {"query": "x"}}', True),  # unknown tool
    ('{"tool": null, "args": {}}', True),
    ('[{"final": "x"}]', False),  # an array, not an object
    ('"Paris"', False),
    ("14", False),
    ("Paris", False),
    ("", False),
    ('{"final": "x"', False),  # truncated
    ("{'final': 'x'}", False),  # Python dict, not JSON
    ('{"final": NaN}', False),  # not strict JSON
    ('{"tool": "calculator", "args": {"expression": "1"}, "n": Infinity}', False),
    ('{"final": 1' + "0" * 100_000 + "}", False),  # an int Python refuses to convert
    ('{"a": ' * 50_000, False),  # nesting deeper than the decoder's recursion
    ('The answer: {"final": "x"}', False),  # prose before
    ('{"final": "x"} Hope that helps!', False),  # prose after
    ('```json\n{"final": "x"}\n```', False),  # code fence
    ('{"final": "x"}{"final": "y"}', False),  # two objects
    ('{"final": "x"}\n{"final": "y"}', False),
])
def test_format_reward_rejects_everything_else(text, valid_json):
    assert format_reward([text]) == [0.0]
    assert score_completion(text, FINAL)["valid_json"] == float(valid_json)
    assert score_completion(text, FINAL)["correct_format"] == 0.0


def test_chat_message_completions():
    msgs = [{"role": "assistant", "content": final("Paris")}]
    assert format_reward([msgs]) == [1.0]
    assert batch(args_reward, [msgs], [FINAL]) == [1.0]
    parts = [{"role": "assistant", "content": [{"type": "text", "text": call("calculator", "expression", "14")}]}]
    assert scores(parts, CALC)["total"] == 2.5
    assert batch(length_penalty, [[{"role": "assistant", "content": "Sure! " + final("Paris")}]], [FINAL]) == [-0.2]


# ------------------------------------------------------------------------------------------- tool


@pytest.mark.parametrize("text,row,expected", [
    (call("calculator", "expression", "1"), CALC, 0.5),
    (call("python", "code", "print(1)"), PY, 0.5),
    (final("Paris"), FINAL, 0.5),
    (call("python", "code", "print(14)"), CALC, -0.5),
    (final("14"), CALC, -0.5),
    (call("calculator", "expression", "1"), FINAL, -0.5),
    (call("calculator", "expression", "1"), PY, -0.5),
    ('{"tool": "search", "args": {"q": "x"}}', FINAL, -0.5),
    ('{"tool": "calculator"}', CALC, 0.5),  # the decision is right even though the call is malformed
    ('{"tool": "calculator", "args": {"expression": 14}}', CALC, 0.5),
    ('Let me compute. {"tool": "calculator", "args": {"expression": "14"}}', CALC, 0.5),  # prose costs elsewhere
    ('{"final": 14}', FINAL, 0.5),
    ('{"final": "x", "tool": "calculator"}', CALC, -0.5),  # ambiguous
    ('{"final": "x", "why": "y"}', FINAL, -0.5),
    ('{"tool": null, "args": {}}', FINAL, -0.5),
    ("14", CALC, -0.5),
    ("", FINAL, -0.5),
    ("not json at all", FINAL, -0.5),
    ('{"final": "Paris"', FINAL, -0.5),  # truncated
])
def test_tool_reward(text, row, expected):
    assert batch(tool_reward, [text], [row]) == [expected]
    assert scores(text, row)["correct_tool"] == float(expected > 0)


def test_tool_reward_reads_category_when_tool_column_is_absent():
    text = call("python", "code", "print(1)")
    assert tool_reward([text, text], category=["python_exec", "no_tool"]) == [0.5, -0.5]
    assert tool_reward([final("x")], tool=[None], category=["calculator"]) == [0.5]  # tool column wins
    with pytest.raises(ValueError, match="'tool' or 'category'"):
        tool_reward([text])
    with pytest.raises(ValueError, match="unknown tool_json category"):
        tool_reward([text], category=["search"])
    with pytest.raises(ValueError, match="2 completions but 1"):
        tool_reward([text, text], tool=["python"])


# ------------------------------------------------------------------------------------------- args


@pytest.mark.parametrize("expression,expected", [
    ("2*(3+4)", 1.0),
    ("14", 1.0),
    ("(3+4)*2", 1.0),
    ("  2 * ( 3 + 4 ) ", 1.0),
    ("14.0000001", 1.0),  # within relative tolerance 1e-6
    ("28/2", 1.0),
    ("7*2 + 0*1e-12", 1.0),
    ("14.001", 0.0),
    ("2*3+4", 0.0),
    ("", 0.0),
    ("x*2", 0.0),  # names are not allowed
    ("2^3", 0.0),  # ^ is not power
    ("1/0", 0.0),
    ("fourteen", 0.0),
])
def test_args_reward_calculator_compares_values(expression, expected):
    assert batch(args_reward, [call("calculator", "expression", expression)], [CALC]) == [expected]


def test_args_reward_calculator_near_zero_and_types():
    row = {**CALC, "tool_args": {"expression": "0.1 + 0.2 - 0.3"}}  # 5.55e-17, not exactly zero
    assert batch(args_reward, [call("calculator", "expression", "0")], [row]) == [1.0]  # abs tolerance 1e-9
    assert batch(args_reward, [call("calculator", "expression", "1e-6")], [row]) == [0.0]
    assert batch(args_reward, ['{"tool": "calculator", "args": {"expression": 14}}'], [CALC]) == [0.0]
    assert batch(args_reward, [call("python", "code", "print(2*(3+4))")], [CALC]) == [0.0]  # wrong tool
    assert batch(args_reward, [final("14")], [CALC]) == [0.0]


@pytest.mark.parametrize("code,expected", [
    ("print('hello'[::-1])", 1.0),
    ('print("hello"[::-1])', 1.0),  # quote style
    ("print( 'hello' [ : : -1 ] )\n\n", 1.0),  # whitespace
    ("# reverse it\nprint('hello'[::-1])  # done", 1.0),  # comments
    ("print('''hello'''[::-1])", 1.0),
    ("print('hello'[::1])", 0.0),
    ("s = 'hello'\nprint(s[::-1])", 0.0),  # equivalent behaviour, different program
    ("print('hello'[::-1]", 0.0),  # syntax error
    ("", 0.0),
])
def test_args_reward_python_compares_asts(code, expected):
    assert batch(args_reward, [call("python", "code", code)], [PY]) == [expected]


def test_args_reward_python_multiline_and_size_limit():
    expected = "total = 0\nfor x in [1, 2, 3]:\n    total += x\nprint(total)"
    row = {**PY, "tool_args": {"code": expected}}
    same = 'total=0\nfor x in [1,2,3]:\n  total+=x\nprint(total)\n'
    assert batch(args_reward, [call("python", "code", same)], [row]) == [1.0]
    big = expected + "\n" + "#" * 30_000
    assert batch(args_reward, [call("python", "code", big)], [row]) == [0.0]  # over 20 kB: not even parsed
    assert same_program("x = 1", "x = 1") and not same_program(None, "x = 1")


def test_odd_literals_in_model_code_print_no_syntax_warnings():
    import warnings

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert not same_program("y = [0x1for x in z]", "y = [x for x in z]")
        assert same_program("a = 1and 2", "a = 1 and 2")
    assert not [w for w in caught if issubclass(w.category, SyntaxWarning)]


@pytest.mark.parametrize("answer,expected,reward", [
    ("Paris", "Paris", 1.0),
    ("paris", "Paris", 1.0),
    ("  PARIS. ", "Paris", 1.0),
    ("The  Pacific\nOcean", "The Pacific Ocean", 1.0),
    ("Lyon", "Paris", 0.0),
    ("Paris, France", "Paris", 0.0),
    ("14", "14", 1.0),
    ("14.0", "14", 1.0),
    ("1,234.5", "1234.5", 1.0),
    ("1e3", "1000", 1.0),
    ("14.0000001", "14", 1.0),
    ("14.1", "14", 0.0),
    ("-0.5", "-.5", 1.0),
    ("14 apples", "14", 0.0),
    ("nan", "nan", 1.0),  # equal as text
    ("inf", "1e999", 0.0),  # never parsed as numbers
])
def test_args_reward_final_answers(answer, expected, reward):
    row = {**FINAL, "expected_answer": expected}
    assert batch(args_reward, [final(answer)], [row]) == [reward]


def test_args_reward_final_needs_a_string_and_the_right_tool():
    assert batch(args_reward, ['{"final": 14}'], [{**FINAL, "expected_answer": "14"}]) == [0.0]  # number, not string
    assert batch(args_reward, ['{"final": ["Paris"]}'], [FINAL]) == [0.0]
    assert batch(args_reward, [call("calculator", "expression", "1")], [FINAL]) == [0.0]
    assert batch(args_reward, ['{"final": "Paris", "confidence": 1}'], [FINAL]) == [0.0]  # extra key
    assert batch(args_reward, ['Answer: {"final": "Paris"}'], [FINAL]) == [1.0]  # prose is charged elsewhere


def test_answer_helpers():
    assert normalize_answer("  The  Nile.\n") == "the nile"
    assert parse_number("1,234") == 1234 and parse_number("12,34") is None and parse_number("$5") is None
    assert same_answer("8", "8.0") and not same_answer("8", "9")


# ----------------------------------------------------------------------------------- length penalty


@pytest.mark.parametrize("text,penalty", [
    (final("Paris"), 0.0),
    ('\n  {"final": "Paris"}  \n', 0.0),  # surrounding whitespace is not text
    ("", -0.2),  # no object at all: nothing of the answer stands alone
    ('{"final": 14}', 0.0),  # a wrong shape is the format reward's business
    ('The answer is {"final": "Paris"}', -0.2),
    ('{"final": "Paris"} (capital of France)', -0.2),
    ('```json\n{"final": "Paris"}\n```', -0.2),
    ('{"final": "Paris"}{"final": "Lyon"}', -0.2),
    ('[{"final": "Paris"}]', -0.2),
    ("Paris", -0.2),
    ('{"final": "Paris"', -0.2),
])
def test_length_penalty(text, penalty):
    assert length_penalty([text]) == [penalty]


# --------------------------------------------------------------------------------- score_completion


def test_score_completion_totals_and_flags():
    perfect = scores(call("calculator", "expression", "(3+4)*2"), CALC)
    assert perfect == {"format_reward": 1.0, "tool_reward": 0.5, "args_reward": 1.0, "length_penalty": 0.0,
                       "total": 2.5, "valid_json": 1.0, "correct_format": 1.0, "correct_tool": 1.0}
    wrapped = scores('Sure: {"tool": "calculator", "args": {"expression": "14"}}', CALC)
    assert wrapped["total"] == pytest.approx(0.5 + 1.0 - 0.2)
    assert (wrapped["valid_json"], wrapped["correct_format"], wrapped["correct_tool"]) == (0.0, 0.0, 1.0)
    garbage = scores("I think it's 14", CALC)
    assert garbage["total"] == pytest.approx(-0.5 - 0.2) and garbage["valid_json"] == 0.0
    weighted = score_completion(final("Lyon"), FINAL, weights={"tool_reward": 2.0, "format_reward": 0.5})
    assert weighted["total"] == pytest.approx(0.5 * 1.0 + 2.0 * 0.5)
    with pytest.raises(ValueError, match="unknown tool_json reward weight"):
        score_completion(final("Paris"), FINAL, weights={"format": 1.0})


def test_reward_functions_registry_and_batches():
    assert set(REWARD_FUNCTIONS) == {"format_reward", "tool_reward", "args_reward", "length_penalty"}
    rows = [CALC, PY, FINAL, FINAL]
    completions = [call("calculator", "expression", "14"), call("python", "code", 'print("hello"[::-1])'),
                   "```" + final("paris") + "```", final("Rome")]
    got = {name: batch(fn, completions, rows) for name, fn in REWARD_FUNCTIONS.items()}
    assert got == {"format_reward": [1.0, 1.0, 0.0, 1.0], "tool_reward": [0.5, 0.5, 0.5, 0.5],
                   "args_reward": [1.0, 1.0, 1.0, 0.0], "length_penalty": [0.0, 0.0, -0.2, 0.0]}
    for i, (c, r) in enumerate(zip(completions, rows, strict=True)):
        assert {k: got[k][i] for k in got} == {k: v for k, v in scores(c, r).items() if k in got}
    # extra TRL keywords are ignored; a single scalar column is broadcast
    assert args_reward(completions[:1], prompts=["p"], trainer_state=None, tool="calculator",
                       tool_args={"expression": "14"}, expected_answer="14") == [1.0]


def test_rewards_accept_dataset_struct_and_json_string_tool_args():
    struct = {**CALC, "tool_args": {"expression": "2*(3+4)", "code": None}}
    as_string = {**PY, "tool_args": json.dumps(PY["tool_args"])}
    assert batch(args_reward, [call("calculator", "expression", "14"), call("python", "code", PY["tool_args"]["code"])],
                 [struct, as_string]) == [1.0, 1.0]


# ------------------------------------------------------------------------------------------- safety

MARKER = Path("/tmp/pwned_x")
HOSTILE = [
    "9**9**9**9",
    "__import__('os').system('touch /tmp/pwned_x')",
    "().__class__.__mro__",
    "'a'*10**9",
    "2**" * 40_000 + "2",  # a 100 kB expression, also a power tower
    "1+" * 50_000 + "1",  # 100 kB of harmless-looking arithmetic
    "10**100**100",
    "(10**100)**100",
    "2**1000 * 2**1000",
    "[x for x in range(10**9)]",
    "open('/tmp/pwned_x', 'w')",
    "exec('import os')",
    "lambda: 1",
    "1 if True else 2",
    "-" * 499 + "1",
    "(" * 240 + "1" + ")" * 240,  # nesting beyond the parser's limit
    "1e308 * 10",
    "10 ** 100 * 10",
    "(-8) ** 0.5",
]


def _peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


@pytest.fixture
def no_marker():
    if MARKER.exists():
        MARKER.unlink()
    yield
    assert not MARKER.exists(), "hostile input had a side effect"


@pytest.mark.parametrize("expression", HOSTILE, ids=[f"{i}-{e[:24]}" for i, e in enumerate(HOSTILE)])
def test_hostile_calculator_args_score_zero_safely(expression, no_marker):
    peak = _peak_rss_mb()
    assert safe_eval(expression) is None
    text = call("calculator", "expression", expression)
    assert batch(args_reward, [text], [CALC]) == [0.0]
    row = {**CALC, "tool_args": {"expression": expression}}  # even as the *expected* expression
    assert batch(args_reward, [text], [row]) == [0.0]
    assert _peak_rss_mb() - peak < 50


@pytest.mark.parametrize("code", [
    *HOSTILE[:5],
    "import os\nos.system('touch /tmp/pwned_x')",
    "open('/tmp/pwned_x', 'w').write('x')",
    "while True:\n    pass",
    "x = 'a' * 10**10\nprint(x)",
], ids=lambda c: c[:24])
def test_python_code_is_parsed_never_run(code, no_marker):
    text = call("python", "code", code)
    assert batch(args_reward, [text], [PY]) == [0.0]
    row = {**PY, "tool_args": {"code": code}}
    # identical code earns the reward by AST comparison alone (when it parses within 20 kB) - and still never runs
    assert batch(args_reward, [text], [row]) == [1.0 if len(code) < 20_000 else 0.0]


def test_safe_eval_values_and_limits():
    assert safe_eval("2 * (3 + 4)") == 14
    assert safe_eval("7 // 2") == 3 and safe_eval("7 % 3") == 1 and safe_eval("-3 + +2") == -1
    assert safe_eval("2 ** -2") == 0.25 and safe_eval("2 ** 0.5") == pytest.approx(1.41421356)
    assert safe_eval("10 ** 100") == 10**100 and safe_eval("10 ** 101") is None
    assert safe_eval("2 ** 101") is None  # exponent over 100
    assert safe_eval("1" * 101) is None  # a literal over 1e100
    assert safe_eval("1e400") is None and safe_eval("True + 1") is None and safe_eval("1j") is None
    assert safe_eval("1; 2") is None and safe_eval("x = 1") is None and safe_eval("") is None
    assert safe_eval(14) is None and safe_eval(None) is None
    assert safe_eval("1 +" + " 1 +" * 120 + " 1") == 122  # long but within limits
    assert safe_eval("(" * 150 + "1" + ")" * 150) == 1
    assert safe_eval("1+" * MAX_EXPRESSION_CHARS + "1") is None
    assert not os.path.exists(MARKER)
