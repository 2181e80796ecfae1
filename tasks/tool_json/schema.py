"""The task's row format and the few facts every other module derives from it.

A row's ``category`` fixes everything else: which tool (if any) is expected,
whether ``tool_needed`` is true, and the one key ``tool_args`` must carry.
Keeping that mapping in one place means the loader, the prompts and the
rewards cannot disagree about it.

``tool_args`` may reach the rewards in three forms, and :func:`expected_arg`
reads all of them: the row format's dict (``{"expression": ...}``), a JSON string,
or the merged struct a ``datasets.Dataset`` builds from mixed dicts
(``{"expression": "2+2", "code": None}``).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any, Final

CATEGORIES: Final = ("calculator", "python_exec", "no_tool")

# category -> the tool a correct answer calls (None: answer directly with {"final": ...})
CATEGORY_TOOL: Final[dict[str, str | None]] = {"calculator": "calculator", "python_exec": "python", "no_tool": None}
# tool -> the single key of its ``args`` object
TOOL_ARG_KEY: Final[dict[str, str]] = {"calculator": "expression", "python": "code"}

FIELDS: Final = ("id", "source", "category", "tool_needed", "tool", "tool_args", "prompt", "expected_answer")


def expected_tool(row: Mapping[str, Any]) -> str | None:
    """The tool a row expects: its ``tool`` field when present (None = answer directly), else the one its
    ``category`` implies.

    Raises ``ValueError`` when the row has neither, or an unknown category,
    because scoring against an unknown target would silently hand out wrong rewards.
    """
    if "tool" in row:
        tool = row["tool"]
        if tool is None or isinstance(tool, str):
            return tool or None
        raise ValueError(f"a tool_json row's 'tool' must be a string or null, got {type(tool).__name__}")
    if "category" in row:
        category = row["category"]
        if category not in CATEGORY_TOOL:
            raise ValueError(f"unknown tool_json category {category!r}; expected one of {CATEGORIES}")
        return CATEGORY_TOOL[category]
    raise ValueError("a tool_json reward needs the dataset's 'tool' or 'category' column")


def expected_arg(tool: str | None, tool_args: Any) -> str | None:
    """The expected expression (calculator) or code (python) from ``tool_args`` in any of its forms."""
    if tool not in TOOL_ARG_KEY:
        return None
    if isinstance(tool_args, str):
        try:
            tool_args = json.loads(tool_args)
        except json.JSONDecodeError:
            return None
    if not isinstance(tool_args, dict):
        return None
    value = tool_args.get(TOOL_ARG_KEY[tool])
    return value if isinstance(value, str) else None
