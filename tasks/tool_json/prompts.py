"""The system prompt and the SFT target for each row.

The model's own chat template is applied elsewhere; this module only builds
chat messages and the exact JSON the model should produce. Targets use
``json.dumps`` with its default separators (one line, ``", "`` and ``": "``)
and a fixed key order (``tool`` before ``args``), so the same row always gives
the same target string, byte for byte.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from .schema import TOOL_ARG_KEY, expected_arg, expected_tool

SYSTEM_PROMPT = """\
You are a helpful assistant that can use two tools:
- calculator: evaluates one arithmetic expression with numbers, + - * / // % ** and parentheses \
(no variables or functions), for example "(12.5 * 4) / 3".
- python: runs a short Python program and returns what it prints.

Reply with exactly one JSON object and nothing else: no prose, no code fences. Use one of these shapes:
{"final": "<answer>"} to answer directly, when no tool is needed;
{"tool": "calculator", "args": {"expression": "<arithmetic expression>"}} to calculate;
{"tool": "python", "args": {"code": "<python program that prints the result>"}} to run code."""


MULTI_TURN_SYSTEM_PROMPT = """\
You are a helpful assistant that can use two tools:
- calculator: evaluates one arithmetic expression with numbers, + - * / // % ** and parentheses \
(no variables or functions), for example "(12.5 * 4) / 3".
- python: runs a short Python program and returns what it prints.

Reply with exactly one JSON object and nothing else: no prose, no code fences.
{"tool": "calculator", "args": {"expression": "<arithmetic expression>"}} calls the calculator;
{"tool": "python", "args": {"code": "<python program that prints the result>"}} runs code;
the tool's result comes back in the next message. {"final": "<answer>"} gives your answer, directly when no tool is \
needed, or after reading the tool's result."""


def expected_output(row: Mapping[str, Any]) -> str:
    """The JSON the model should produce for ``row``: a direct answer or the expected tool call."""
    tool = expected_tool(row)
    if tool is None:
        return json.dumps({"final": row["expected_answer"]}, ensure_ascii=False)
    arg = expected_arg(tool, row.get("tool_args"))
    if arg is None:
        raise ValueError(f"row {row.get('id')!r}: tool_args has no {TOOL_ARG_KEY.get(str(tool), 'argument')!r}")
    return json.dumps({"tool": tool, "args": {TOOL_ARG_KEY[tool]: arg}}, ensure_ascii=False)


def messages(row: Mapping[str, Any], multi_turn: bool = False) -> list[dict[str, str]]:
    """``[system, user]`` chat messages for ``row``'s prompt (the system prompt of multi-turn episodes, where the
    tools' results come back)."""
    system = MULTI_TURN_SYSTEM_PROMPT if multi_turn else SYSTEM_PROMPT
    return [{"role": "system", "content": system}, {"role": "user", "content": row["prompt"]}]
