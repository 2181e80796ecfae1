"""Multi-turn episodes of the JSON tool task (``task.episode=multi_turn``): the trajectory an SFT warm-up imitates
(the expected call, the tool's real result, the final answer), and the scores of an episode the model played (its
messages after the prompt, as TRL's tool loop returns them: assistant turns with ``tool_calls`` or ``content``, and
``tool`` turns with each result).

The episode reward: ``ANSWER`` for a final answer equal to ``expected_answer`` (numbers within tolerance, text
normalised), ``CALL`` for exactly one well-formed call to the expected tool where a tool is needed (nothing for the
wrong tool, for extra calls, or for a call where none is needed), and ``OUTSIDE`` for each of the model's turns
with text outside its JSON object (the single-turn task's length rule)."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any, Final

from .parsing import parse_output
from .rewards import _rows, same_answer
from .schema import TOOL_ARG_KEY, expected_arg, expected_tool
from .tools import call_tool, failed

ANSWER: Final = 1.0
CALL: Final = 0.2
OUTSIDE: Final = -0.2


def trajectory(row: Mapping[str, Any]) -> list[dict]:
    """The episode a row's answer is: its expected call, the tool's actual result, then ``{"final": ...}``; a row
    that needs no tool answers at once."""
    final = {"role": "assistant", "content": json.dumps({"final": row["expected_answer"]}, ensure_ascii=False)}
    tool = expected_tool(row)
    if tool is None:
        return [final]
    args = {TOOL_ARG_KEY[tool]: expected_arg(tool, row.get("tool_args"))}
    result, _ = call_tool(tool, args)
    call = {"type": "function", "function": {"name": tool, "arguments": args}}
    return [{"role": "assistant", "content": "", "tool_calls": [call]},
            {"role": "tool", "name": tool, "content": result}, final]


def score_episode(messages: Sequence[Mapping[str, Any]] | str, row: Mapping[str, Any]) -> dict[str, float]:
    """The episode's reward (``episode_reward``) and what it is made of: ``answer_correct``, ``tool_calls``,
    ``tool_errors``, ``called`` (any call), ``right_call`` (one call, of the expected tool), ``turns`` and
    ``valid_json`` (the share of the model's turns that are one JSON object)."""
    if isinstance(messages, str):  # a completion read as text (a single-turn model): one turn
        messages = [{"role": "assistant", "content": messages}]
    turns = [m for m in messages if m.get("role") == "assistant"]
    calls = [c for m in turns for c in (m.get("tool_calls") or [])]
    results = [m.get("content") for m in messages if m.get("role") == "tool"]
    written = [parse_output(m.get("content") or "") for m in turns if not m.get("tool_calls")]
    final = written[-1] if written and turns and not turns[-1].get("tool_calls") else None
    answer = final.value if final is not None and final.shape == "final" else None
    tool = expected_tool(row)
    names = [c.get("function", {}).get("name") for c in calls]
    right_call = tool is not None and names == [tool]
    correct = isinstance(answer, str) and isinstance(row.get("expected_answer"), str) and same_answer(
        answer, row["expected_answer"])
    outside = sum(1 for p in written if p.outside_text)
    valid = sum(1 for p in written if p.valid_json) + len([m for m in turns if m.get("tool_calls")])
    return {
        "episode_reward": ANSWER * correct + CALL * right_call + OUTSIDE * outside,
        "answer_correct": float(correct),
        "tool_calls": float(len(calls)),
        "tool_errors": float(sum(failed(r) for r in results)),
        "called": float(bool(calls)),
        "right_call": float(right_call),
        "turns": float(len(turns)),
        "valid_json": valid / len(turns) if turns else 0.0,
    }


def episode_reward(completions: Sequence[Any], **kwargs: Any) -> list[float]:
    """TRL's reward signature: each completion's episode (the messages after its prompt) scored against its row
    (``score_episode``)."""
    completions = list(completions)
    rows = _rows(len(completions), kwargs)
    return [score_episode(c, r)["episode_reward"] for c, r in zip(completions, rows, strict=True)]


def episode_rates(records: Sequence[Mapping[str, Any]]) -> dict[str, float]:
    """An evaluation's tool use: the call rate where a tool is and is not needed, and the share of calls that
    failed (their result an error)."""
    needed = [r["scores"]["called"] for r in records if r.get("tool_needed")]
    not_needed = [r["scores"]["called"] for r in records if r.get("tool_needed") is False]
    calls = sum(r["scores"]["tool_calls"] for r in records)
    return {"call_rate_needed": sum(needed) / len(needed) if needed else float("nan"),
            "call_rate_not_needed": sum(not_needed) / len(not_needed) if not_needed else float("nan"),
            "tool_error_rate": sum(r["scores"]["tool_errors"] for r in records) / calls if calls else float("nan")}


EPISODE_FIGURES = frozenset({"episode_reward", "answer_correct", "tool_calls", "tool_errors", "called", "right_call",
                             "turns", "valid_json", "call_rate_needed", "call_rate_not_needed", "tool_error_rate"})
