"""The JSON tool task's two tools as an episode runs them: the calculator through the bounded evaluator
(``safe_eval``), Python through the sandbox (``ao_calib.tools.sandbox``); neither evaluates the model's text in the
trainer's process. ``call_tool`` answers any call the model writes (an unknown tool, malformed arguments, a failing
program) with the text the next turn reads, never an exception."""

from __future__ import annotations

from typing import Any

from ao_calib.tools.sandbox import SandboxLimits, run_python

from .safe_eval import safe_eval
from .schema import TOOL_ARG_KEY
from .templates import format_number


def calculator(expression: str) -> str:
    """Evaluates an arithmetic expression.

    Args:
        expression: Numbers, + - * / // % **, unary minus and parentheses, e.g. "8 * 11.30 + 5 * 37.65".
    """
    value = safe_eval(expression)
    if value is None:
        return ("Error: the calculator evaluates arithmetic only (numbers, + - * / // % **, parentheses), within "
                "bounded sizes")
    return format_number(value)


def python(code: str) -> str:
    """Runs a Python program in a sandbox and returns what it printed.

    Args:
        code: The program; print the answer.
    """
    return run_python(code).tool_result()


def failed(result: Any) -> bool:
    """Whether a tool result reports a failure: the tools' own ``Error: ...`` text (also after a program's output,
    as its traceback's last line) or TRL's record of a tool function that raised (``{'error': ...}``)."""
    text = str(result)
    return text.startswith(("Error:", "{'error'")) or "\nError: " in text


def call_tool(name: Any, args: Any, limits: SandboxLimits = SandboxLimits()) -> tuple[str, bool]:
    """(the tool result's text, whether the call failed) for a call as the model wrote it."""
    if name not in TOOL_ARG_KEY:
        return f"Error: unknown tool {name!r}; the tools are {', '.join(sorted(TOOL_ARG_KEY))}", True
    key = TOOL_ARG_KEY[name]
    if not isinstance(args, dict) or set(args) != {key} or not isinstance(args[key], str):
        return f"Error: {name} takes one argument, {{\"{key}\": <string>}}; got {args!r}"[:300], True
    result = calculator(args[key]) if name == "calculator" else run_python(args[key], limits).tool_result()
    return result, failed(result)
