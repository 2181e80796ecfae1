"""Evaluation's multi-turn episodes: greedy turns, each read with the tokenizer's response parser (the one TRL's
tool loop reads rollouts with, ``chat_format``), the calls run as TRL runs them (``tool(**arguments)``; an unknown
tool or an exception becomes an error result), until the model answers without a call or the task's rounds are
spent; then a row's next user turn, if it has more (BFCL's multi-turn cases). Training never comes here: GRPO's
rollouts are TRL's own loop, whose ids are never re-tokenised; an evaluation is scored on its text and may re-render
it."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from ao_calib.core.chat import chat_prompt_text
from ao_calib.tools import LATER_TURNS, Tools

SILENT_TOOLS = "silent_tools"  # an evaluation variant: the same episodes with tools that return nothing
__all__ = ["LATER_TURNS", "SILENT_TOOLS", "final_text", "parsed_turn", "play", "tool_result"]


def play(generate_turn: Callable[[list[dict]], list[str]], rows: Sequence[dict], tools: Tools | Callable[[dict], Tools],
         tokenizer, chat_template_kwargs: dict, parse: Callable[..., dict] | None = None) -> list[list[dict]]:
    """Each row's episode after its prompt (assistant, tool and later user messages). ``generate_turn(rows)``
    answers rows whose ``prompt`` is the conversation so far, one greedy message each. ``tools``: the same for every
    row, or a row's own (a BFCL case's instances). A row with ``LATER_TURNS`` goes on: when the model answers without
    a call, or its rounds of calls are spent, the next user turn is appended and its rounds start again. ``parse``:
    how a message's calls are read (``parsed_turn``'s signature) where a row's tools name none (``Tools.parse``);
    by default the tokenizer's response parser."""
    row_tools = [tools if isinstance(tools, Tools) else tools(row) for row in rows]
    later = [[list(turn) for turn in row.get(LATER_TURNS) or []] for row in rows]
    rounds = [0] * len(rows)
    episodes: list[list[dict]] = [[] for _ in rows]
    waiting = list(range(len(rows)))
    while waiting:
        asked = [{**rows[i], "prompt": list(rows[i]["prompt"]) + episodes[i]} for i in waiting]
        texts = generate_turn(asked)
        still = []
        for i, row, text in zip(waiting, asked, texts, strict=True):
            prompt_text = chat_prompt_text(tokenizer, row["prompt"], chat_template_kwargs)  # as generation read it
            message = (row_tools[i].parse or parse or parsed_turn)(tokenizer, prompt_text, text)
            episodes[i].append(message)
            if message.get("tool_calls") and rounds[i] < row_tools[i].max_rounds:
                episodes[i] += [tool_result(call, row_tools[i]) for call in message["tool_calls"]]
                rounds[i] += 1
                still.append(i)
            elif later[i]:
                episodes[i] += later[i].pop(0)
                rounds[i] = 0
                still.append(i)
        waiting = still
    return episodes


def parsed_turn(tokenizer, prompt_text: str, text: str) -> dict:
    """The model's message: its text as written (re-rendered as written in the next turn's prompt) and the calls
    the response parser reads in it."""
    try:
        parsed = tokenizer.parse_response(text, prefix=prompt_text)
    except (ValueError, TypeError):  # unparseable: the text alone, as TRL's parse_response falls back
        parsed = {}
    calls = parsed.get("tool_calls") if isinstance(parsed, dict) else None
    return {"role": "assistant", "content": text, **({"tool_calls": calls} if calls else {})}


def tool_result(call: dict, tools: Tools) -> dict:
    """A call's result message, as TRL's loop writes it (an error as ``{'error': ...}``)."""
    function = call.get("function") or {}
    name = function.get("name")
    try:
        tool = tools.by_name().get(name)
        if tool is None or call.get("type") != "function":
            raise ValueError(f"Tool {name} not found.")
        result = tool(**function.get("arguments", {}))
    except Exception as exc:  # noqa: BLE001 -- any failure of the model's call is its result, never the run's
        result = {"error": str(exc)}
    return {"role": "tool", "name": name, "content": str(result)}


def assistant_texts(episode: list[dict]) -> list[str]:
    """The text of each assistant message of an episode, in order."""
    return [m.get("content") or "" for m in episode if m.get("role") == "assistant"]


def final_text(episode: list[dict] | str) -> str:
    """What an episode ended with: its last assistant message's text."""
    if isinstance(episode, str):
        return episode
    said = assistant_texts(episode)
    return said[-1] if said else ""
