"""The JSON tool task's tools as an episode calls them (``tasks.tool_json.tools.call_tool``): the calculator
through the bounded evaluator, Python through the sandbox, and every malformed call answered with a message the
next turn reads, counted as a failure, never raised."""

from __future__ import annotations

import pytest

from tasks.tool_json.tools import call_tool


@pytest.mark.parametrize(("name", "args", "result", "failed"), [
    ("calculator", {"expression": "103.45 / 9"}, "11.4944444444", False),
    ("calculator", {"expression": "8 * 11.30 + 5 * 37.65"}, "278.65", False),
    ("python", {"code": "print(bin(72466)[2:])"}, "10001101100010010\n", False),
    ("python", {"code": "1 / 0"}, "Error: ZeroDivisionError: division by zero", True),
    ("calculator", {"expression": "__import__('os').system('ls')"},
     "Error: the calculator evaluates arithmetic only", True),
    ("search", {"query": "x"}, "Error: unknown tool 'search'; the tools are calculator, python", True),
    ("python", {"code": 5}, 'Error: python takes one argument, {"code": <string>}', True),
    ("calculator", {"expression": "1", "extra": 2}, 'Error: calculator takes one argument', True),
    ("calculator", "1+1", 'Error: calculator takes one argument', True),
])
def test_each_call_gets_a_result_or_a_message(name, args, result, failed):
    text, was_error = call_tool(name, args)
    assert text.startswith(result) and was_error == failed
