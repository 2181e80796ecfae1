"""Completions as TRL hands them to reward functions: plain strings or chat-message lists."""

from __future__ import annotations

from typing import Any


def completion_text(completion: Any) -> str:
    """Return the text of a completion given as a string or a chat-message list.

    TRL passes plain strings for standard datasets and lists of messages
    (``[{"role": "assistant", "content": "..."}]``) for conversational ones.
    Assistant messages are joined with newlines (all messages when none has an
    assistant role); content given as a list of parts keeps its text parts.
    """
    if completion is None:
        return ""
    if isinstance(completion, str):
        return completion
    if isinstance(completion, dict):
        return _content_text(completion.get("content"))
    if isinstance(completion, (list, tuple)):
        messages = [m for m in completion if isinstance(m, dict)]
        assistant = [m for m in messages if m.get("role") == "assistant"]
        chosen = assistant or messages
        return "\n".join(_content_text(m.get("content")) for m in chosen)
    return str(completion)


def _content_text(content: Any) -> str:
    """Text of a message's content: a string, or a list of ``{"type": "text", "text": ...}`` parts."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = []
        for part in content:
            if isinstance(part, str):
                parts.append(part)
            elif isinstance(part, dict) and isinstance(part.get("text"), str):
                parts.append(part["text"])
        return "".join(parts)
    return str(content)
