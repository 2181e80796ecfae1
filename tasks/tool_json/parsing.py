"""Read one completion into the facts every reward needs, once.

The object is located the way the spec prescribes: ``json.JSONDecoder().raw_decode``
starting at the first ``{``. Text before that brace or after the object
(prose, code fences, a second object) is *outside* the object: it costs the
length penalty and the format reward, but the tool choice and arguments are
still read from the object, so those rewards keep their own signal. A second
object is another call, though (the same one repeated, or a different one), and
an answer is one call: then no tool choice, shape or argument is read at all.
A completion without any object (an empty one too) is all outside text.

Shapes (the output contract), with exact key sets:

* ``{"final": str}``
* ``{"tool": "calculator", "args": {"expression": str}}``
* ``{"tool": "python", "args": {"code": str}}``

The *chosen tool* is read more leniently than the shape, so that a right
decision with malformed arguments still earns the tool reward: an object whose
only key is ``final`` chooses no tool (``None``); an object with a string
``tool`` and no ``final`` chooses that tool; anything else (no object, both
keys, a non-string tool, a second object) is undecidable.

TRL calls each reward function on the same completions in turn, so parsing is
cached; the result is immutable and safe to share.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from ao_calib.rewards import completion_text
from .schema import TOOL_ARG_KEY


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not valid JSON")


# Strict JSON: NaN and Infinity, which Python's json accepts by default, make the object invalid.
_DECODER = json.JSONDecoder(parse_constant=_reject_constant)


@dataclass(frozen=True)
class ParsedOutput:
    """What a completion says, as far as the rewards care.

    ``found``: a JSON object was decoded at the first ``{``.
    ``valid_json``: the whole stripped completion is one JSON object.
    ``shape``: ``"final"``, ``"calculator"`` or ``"python"`` when the completion's only object has one of the
    three exact shapes, else None. ``value``: the answer, expression or code for that shape.
    ``decided``/``tool``: whether a tool choice can be read, and which (None = answer directly).
    ``outside_text``: non-whitespace text outside the object, or no object at all (an empty completion too).
    """

    found: bool
    valid_json: bool
    shape: str | None
    value: str | None
    decided: bool
    tool: str | None
    outside_text: bool

    @property
    def correct_format(self) -> bool:
        """Exactly one JSON object of one of the three shapes, and nothing else."""
        return self.valid_json and self.shape is not None


def object_shape(obj: Any) -> tuple[str | None, str | None]:
    """``(shape, value)`` for an object of one of the three exact shapes, else ``(None, None)``."""
    if not isinstance(obj, dict):
        return None, None
    if set(obj) == {"final"}:
        return ("final", obj["final"]) if isinstance(obj["final"], str) else (None, None)
    if set(obj) == {"tool", "args"}:
        tool, args = obj["tool"], obj["args"]
        key = TOOL_ARG_KEY.get(tool) if isinstance(tool, str) else None
        if key and isinstance(args, dict) and set(args) == {key} and isinstance(args[key], str):
            return tool, args[key]
    return None, None


def _tool_choice(obj: dict[str, Any]) -> tuple[bool, str | None]:
    if "final" in obj and "tool" not in obj:
        return (True, None) if set(obj) == {"final"} else (False, None)
    if "final" not in obj and isinstance(obj.get("tool"), str):
        return True, obj["tool"]
    return False, None


# Where a JSON object can begin: a brace, then a key or the closing brace. Trying only these keeps braces in
# prose (each failed decode costs a pass over the text) from making the search quadratic.
_OBJECT_START = re.compile(r'\{\s*["}]')


def _another_object(text: str, start: int) -> bool:
    """Whether a JSON object begins anywhere from ``start`` on: a second call."""
    for match in _OBJECT_START.finditer(text, start):
        try:
            _DECODER.raw_decode(text, match.start())
            return True
        except (ValueError, RecursionError):
            continue
    return False


@lru_cache(maxsize=4096)
def _parse_text(text: str) -> ParsedOutput:
    stripped = text.strip()
    start = stripped.find("{")
    obj: Any = None
    end = -1
    if start >= 0:
        try:
            obj, end = _DECODER.raw_decode(stripped, start)
        except (ValueError, RecursionError):  # ValueError: JSONDecodeError, NaN, or an int over 4300 digits
            obj = None
    if not isinstance(obj, dict):
        return ParsedOutput(False, False, None, None, False, None, outside_text=True)
    exact = start == 0 and end == len(stripped)
    if not exact and _another_object(stripped, end):  # two calls are not the one call an answer makes
        return ParsedOutput(True, False, None, None, False, None, outside_text=True)
    shape, value = object_shape(obj)
    decided, tool = _tool_choice(obj)
    return ParsedOutput(True, exact, shape, value, decided, tool, outside_text=not exact)


def parse_output(completion: Any) -> ParsedOutput:
    """Parse a completion given as a string or a chat-message list (TRL passes either)."""
    return _parse_text(completion_text(completion))
