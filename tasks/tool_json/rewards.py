"""PPO/GRPO rewards for JSON tool calling.

Every reward has TRL's signature ``fn(completions, **kwargs) -> list[float]``.
Completions are strings or chat-message lists; the dataset's columns arrive as
keyword lists: ``tool`` (or, failing that, ``category``) gives the expected
tool, ``tool_args`` the expected expression or code, ``expected_answer`` the
direct answer. Other keywords TRL passes (``prompts``, ``trainer_state``, ...)
are ignored.

* ``format_reward``  +1.0 when the stripped completion is exactly one JSON object of one of the three shapes.
* ``tool_reward``    +0.5 when the chosen tool equals the expected one (None for a direct answer), else −0.5,
  unparseable output and more than one object (a repeated or extra call) included.
* ``args_reward``    +1.0 when the arguments are semantically right for the expected tool (see
  :func:`args_match`); 0.0 otherwise, wrong tool or shape and a repeated or extra call included.
* ``length_penalty`` −0.2 unless the completion is the JSON object alone: text outside it, or no object at all
  (an empty answer too), else 0.

The tool and arguments are read from the object even when prose surrounds it
(see :mod:`ao_calib_tasks.tool_json.parsing`): the format reward and the length penalty
already charge for the prose, and charging again would blur which mistake was made. A second object is not
prose but a second call, and an answer is one call, so then no tool or argument is read.

Safety: calculator expressions go only through :func:`ao_calib_tasks.tool_json.safe_eval.safe_eval`;
Python code is only ever parsed (``ast.parse``, at most :data:`MAX_CODE_BYTES`) and compared by
``ast.dump``, never executed.
"""

from __future__ import annotations

import ast
import re
import warnings
from collections.abc import Callable, Mapping, Sequence
from functools import lru_cache
from typing import Any, Final

from ao_calib.calibration import CalibrationConfig, make_calibrated_reward
from ao_calib.rewards import completion_text

from .parsing import ParsedOutput, parse_output
from .safe_eval import numbers_close, safe_eval
from .schema import expected_arg, expected_tool

FORMAT_REWARD: Final = 1.0
TOOL_REWARD: Final = 0.5
ARGS_REWARD: Final = 1.0
LENGTH_PENALTY: Final = -0.2
MAX_CODE_BYTES: Final = 20_000

DEFAULT_WEIGHTS: Final[dict[str, float]] = {
    "format_reward": 1.0, "tool_reward": 1.0, "args_reward": 1.0, "length_penalty": 1.0,
}

_NUMBER = re.compile(r"[-+]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][-+]?\d+)?")
_GROUPED = re.compile(r"[-+]?\d{1,3}(?:,\d{3})+(?:\.\d*)?")


# ------------------------------------------------------------------------------------------ comparisons


def python_ast_key(code: object) -> str | None:
    """``ast.dump`` of the program (formatting, comments and quote style drop out), or None if it does not
    parse or is larger than MAX_CODE_BYTES. The code is parsed, never run."""
    if not isinstance(code, str) or len(code.encode("utf-8", "surrogatepass")) > MAX_CODE_BYTES:
        return None
    try:
        with warnings.catch_warnings():  # model output is full of odd literals; each would print a SyntaxWarning
            warnings.simplefilter("ignore", SyntaxWarning)
            return ast.dump(ast.parse(code, mode="exec"))
    except (SyntaxError, ValueError, MemoryError, RecursionError):
        return None


@lru_cache(maxsize=2048)
def _expected_ast_key(code: str) -> str | None:
    """Expected programs repeat across a batch (one prompt, many samples), so their key is cached."""
    return python_ast_key(code)


@lru_cache(maxsize=4096)
def _expected_value(expression: str) -> int | float | None:
    return safe_eval(expression)


def same_program(code: object, expected: str) -> bool:
    """True iff both programs parse and have equal ASTs."""
    key = python_ast_key(code)
    return key is not None and key == _expected_ast_key(expected)


def same_value(expression: object, expected: str) -> bool:
    """True iff both expressions evaluate safely to numbers equal within tolerance."""
    got = safe_eval(expression)
    want = _expected_value(expected) if len(expected) <= 10_000 else None
    return got is not None and want is not None and numbers_close(got, want)


def normalize_answer(text: str) -> str:
    """Case- and whitespace-insensitive form of a direct answer, without a trailing period."""
    return " ".join(text.split()).lower().rstrip(".").rstrip()


def parse_number(text: str) -> float | None:
    """A plain decimal number ("14", "-2.5", "1e3", "1,234.5"), else None; no nan/inf, no units."""
    text = text.strip()
    if _GROUPED.fullmatch(text):
        text = text.replace(",", "")
    if not _NUMBER.fullmatch(text):
        return None
    try:
        return float(text)
    except (ValueError, OverflowError):
        return None


def same_answer(answer: str, expected: str) -> bool:
    """Equal after :func:`normalize_answer`, or both numbers equal within tolerance."""
    if normalize_answer(answer) == normalize_answer(expected):
        return True
    a, b = parse_number(normalize_answer(answer)), parse_number(normalize_answer(expected))
    return a is not None and b is not None and numbers_close(a, b)


def args_match(parsed: ParsedOutput, tool: str | None, arg: str | None, answer: str | None) -> bool:
    """Whether a parsed output has the expected shape and semantically right arguments.

    ``tool`` is the expected tool (None: a direct answer), ``arg`` the expected
    expression or code, ``answer`` the expected direct answer.
    """
    if parsed.value is None or parsed.shape != (tool or "final"):
        return False
    if tool is None:
        return answer is not None and same_answer(parsed.value, answer)
    if arg is None:
        return False
    if tool == "calculator":
        return same_value(parsed.value, arg)
    if tool == "python":
        return same_program(parsed.value, arg)
    return False


# --------------------------------------------------------------------------------- one completion


def _tool_score(parsed: ParsedOutput, row: Mapping[str, Any]) -> float:
    return TOOL_REWARD if parsed.decided and parsed.tool == expected_tool(row) else -TOOL_REWARD


def _args_score(parsed: ParsedOutput, row: Mapping[str, Any]) -> float:
    tool = expected_tool(row)
    answer = row.get("expected_answer")
    ok = args_match(parsed, tool, expected_arg(tool, row.get("tool_args")), answer if isinstance(answer, str) else None)
    return ARGS_REWARD if ok else 0.0


def score_completion(text: Any, row: Mapping[str, Any], weights: Mapping[str, float] | None = None
                     ) -> dict[str, float]:
    """Every reward for one completion against one dataset row, their weighted ``total`` (weights default
    to 1 each; a weight not given stays 1), and the three validation flags as 0/1: ``valid_json``
    (the completion is one JSON object), ``correct_format`` (of one of the three shapes) and
    ``correct_tool`` (the chosen tool is the expected one)."""
    parsed = parse_output(text)
    scores = {
        "format_reward": FORMAT_REWARD if parsed.correct_format else 0.0,
        "tool_reward": _tool_score(parsed, row),
        "args_reward": _args_score(parsed, row),
        "length_penalty": LENGTH_PENALTY if parsed.outside_text else 0.0,
    }
    unknown = set(weights or {}) - set(DEFAULT_WEIGHTS)
    if unknown:
        raise ValueError(f"unknown tool_json reward weight(s) {sorted(unknown)}; known: {list(DEFAULT_WEIGHTS)}")
    w = {**DEFAULT_WEIGHTS, **(weights or {})}
    scores["total"] = sum(w[k] * scores[k] for k in DEFAULT_WEIGHTS)
    scores["valid_json"] = float(parsed.valid_json)
    scores["correct_format"] = float(parsed.correct_format)
    scores["correct_tool"] = float(scores["tool_reward"] > 0)
    return scores


# ------------------------------------------------------------------------------------ TRL rewards

_COLUMNS: Final = ("category", "tool", "tool_args", "expected_answer")


def _column(values: Any, n: int, name: str) -> list[Any]:
    """Align a dataset column with the completions: a list as given, a single value repeated."""
    if values is None or isinstance(values, (str, dict)):
        return [values] * n
    values = list(values)
    if len(values) != n:
        raise ValueError(f"got {n} completions but {len(values)} values of '{name}'")
    return values


def _rows(n: int, kwargs: dict[str, Any]) -> list[dict[str, Any]]:
    """One row per completion, holding only the columns TRL actually passed (so a null ``tool`` is told
    apart from a missing one)."""
    cols = {k: _column(kwargs[k], n, k) for k in _COLUMNS if k in kwargs}
    return [{k: v[i] for k, v in cols.items()} for i in range(n)]


def format_reward(completions: Sequence[Any], **kwargs: Any) -> list[float]:
    """+1.0 for exactly one JSON object of one of the three shapes, else 0.0."""
    return [FORMAT_REWARD if parse_output(c).correct_format else 0.0 for c in completions]


def tool_reward(completions: Sequence[Any], **kwargs: Any) -> list[float]:
    """+0.5 when the chosen tool is the expected one (None for a direct answer), else −0.5; an answer of more than
    one object (the call repeated, or another) makes no single choice."""
    completions = list(completions)
    return [_tool_score(parse_output(c), r) for c, r in zip(completions, _rows(len(completions), kwargs), strict=True)]


def args_reward(completions: Sequence[Any], **kwargs: Any) -> list[float]:
    """+1.0 for semantically correct arguments (value, AST or normalised answer) in the answer's only object,
    else 0.0."""
    completions = list(completions)
    return [_args_score(parse_output(c), r) for c, r in zip(completions, _rows(len(completions), kwargs), strict=True)]


def length_penalty(completions: Sequence[Any], **kwargs: Any) -> list[float]:
    """−0.2 unless the completion is the JSON object alone: text outside it (prose, code fences, a second
    object) or no object at all (an empty answer too); else 0.0."""
    return [LENGTH_PENALTY if parse_output(c).outside_text else 0.0 for c in completions]


REWARD_FUNCTIONS: dict[str, Callable[..., list[float]]] = {
    "format_reward": format_reward,
    "tool_reward": tool_reward,
    "args_reward": args_reward,
    "length_penalty": length_penalty,
}


def make_calibrated_args(rule: CalibrationConfig):
    """reward=calibrated_tool_json: ``args_reward`` (0/1: the answer is semantically right) is the
    informativeness of a tagged answer, scored args − λ·(conf/100 − args)²."""

    def informativeness(statuses, completions, **kwargs: Any) -> list[float]:
        rows = _rows(len(completions), kwargs)
        return [_args_score(parse_output(s.answer if s.parsed else completion_text(c)), r)
                for c, s, r in zip(completions, statuses, rows)]

    return make_calibrated_reward(informativeness, rule, name="calibrated_args")
