"""GRPO rewards for Python-style function calling.

Every reward has TRL's signature ``fn(completions, answer, **kwargs) -> list[float]``;
``answer`` is the dataset column of expected calls, one per line. Other keyword
arguments TRL passes (``prompts``, ``trainer_state``, ...) are ignored.

Comparisons work on multisets, so call order does not matter but duplicates
do. Argument values compare by value with Python's numeric rule (``5 == 5.0``)
except that booleans only equal booleans (``True != 1``), because a model that
writes ``1`` for a boolean flag has not got it right.

A call without arguments counts for ``tool_call_params`` as the one fact that it
takes none, so where such a call is due, making no call earns no parameter credit.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from functools import lru_cache
from typing import Any

from ao_calib.calibration import CalibrationConfig, make_calibrated_reward, parse_epistemic_status
from .parsing import completion_text, parse_calls

Canon = tuple  # a hashable, canonical form of a value or a call


def canonical_value(value: Any) -> Canon:
    """Hashable form in which two values are equal iff they match under the reward's rule.

    Integral floats become ints (so ``5`` and ``5.0`` coincide, even for huge
    values); bools get their own tag; lists and tuples share one tag; dicts and
    sets are sorted so their order does not matter.
    """
    if isinstance(value, bool):
        return ("bool", value)
    if isinstance(value, float):
        if math.isfinite(value) and value.is_integer():
            return ("num", int(value))
        return ("num", value)
    if isinstance(value, (int, complex)):
        return ("num", value)
    if isinstance(value, str):
        return ("str", value)
    if value is None:
        return ("none",)
    if isinstance(value, (list, tuple)):
        return ("seq", tuple(canonical_value(v) for v in value))
    if isinstance(value, dict):
        items = ((canonical_value(k), canonical_value(v)) for k, v in value.items())
        return ("dict", tuple(sorted(items, key=repr)))
    if isinstance(value, (set, frozenset)):
        return ("set", tuple(sorted((canonical_value(v) for v in value), key=repr)))
    if isinstance(value, bytes):
        return ("bytes", value)
    return ("other", repr(value))


@lru_cache(maxsize=8192)
def _canonical_calls(text: str) -> tuple[tuple[str, tuple[tuple[str, Canon], ...]], ...]:
    """Parse once and cache: TRL calls each reward on the same completions in turn.

    Each call becomes ``(name, sorted((arg, canonical value)))``; the result is
    fully immutable, so sharing it through the cache is safe.
    """
    return tuple(
        (c.name, tuple(sorted(((k, canonical_value(v)) for k, v in c.args), key=lambda kv: kv[0])))
        for c in parse_calls(text)
    )


def _f1(predicted: Counter, expected: Counter) -> float:
    """Multiset F1 = 2·|P∩E| / (|P|+|E|); 1.0 when both are empty, 0.0 when one is."""
    total = sum(predicted.values()) + sum(expected.values())
    if total == 0:
        return 1.0
    overlap = sum((predicted & expected).values())
    return 2.0 * overlap / total


def argument_facts(calls: Iterable[tuple[str, tuple[tuple[str, Canon], ...]]]) -> Counter:
    """The multiset ``tool_call_params`` compares: each call's (function, argument, value) triples, and for a call
    without arguments the single fact (function, None, None) that it takes none, which a missing call lacks."""
    return Counter(fact for name, args in calls
                   for fact in ([(name, key, value) for key, value in args] or [(name, None, None)]))


def format_credit(called: Sequence[str], expected: int, listed: Iterable[str] | None) -> float:
    """Credit for well-formed calls (the names ``called``, ``expected`` calls): calls to functions the prompt
    lists (every name counts when ``listed`` is unknown), capped at the expected number, over max(expected,
    produced). No call earns nothing where calls are expected, and everything where none is; a repeated or extra
    call, or an unlisted function, earns less than the right number of calls. The BFCL format's credit too."""
    if not called or not expected:
        return float(not called and not expected)
    names = None if listed is None else set(listed)
    known = sum(names is None or name in names for name in called)
    return min(known, expected) / max(len(called), expected)


def score_completion(text: Any, answer: str, listed: Iterable[str] | None = None) -> dict[str, float]:
    """All five rewards for one completion (string or chat-message list) and its expected answer; ``listed`` names
    the functions the prompt offers (the row's ``possible_boxed_answers``). A leading ``[epistemic status: NN]``
    tag (reward=calibrated_function_call) is set aside before the calls are read."""
    status = parse_epistemic_status(completion_text(text))
    pred = _canonical_calls(status.answer if status.parsed else completion_text(text))
    gold = _canonical_calls(answer if isinstance(answer, str) else completion_text(answer))
    function = _f1(Counter(n for n, _ in pred), Counter(n for n, _ in gold))
    params = _f1(argument_facts(pred), argument_facts(gold))
    exact = 1.0 if Counter(pred) == Counter(gold) else 0.0
    return {
        "tool_call_parseable": format_credit([name for name, _ in pred], len(gold), listed),
        "tool_call_function": function,
        "tool_call_params": params,
        "tool_call_exact": exact,
        "tool_call_overall": 0.4 * function + 0.4 * params + 0.2 * exact,
    }


def _answers(answer: Any, n: int) -> Sequence[str]:
    """Align ``answer`` with the completions: a list as given, a single string repeated."""
    if answer is None:
        return [""] * n
    if isinstance(answer, str):
        return [answer] * n
    answers = ["" if a is None else a for a in answer]
    if len(answers) != n:
        raise ValueError(f"got {n} completions but {len(answers)} answers")
    return answers


def _listed(possible_boxed_answers: Any, n: int) -> Sequence[Any]:
    """Each completion's offered function names: the column as TRL passes it (one list per row), or unknown."""
    if possible_boxed_answers is None:
        return [None] * n
    if len(possible_boxed_answers) != n:
        raise ValueError(f"got {n} completions but {len(possible_boxed_answers)} lists of functions")
    return possible_boxed_answers


def _batch(key: str, completions: Iterable[Any], answer: Any, possible_boxed_answers: Any = None) -> list[float]:
    completions = list(completions)
    n = len(completions)
    return [score_completion(c, a, listed)[key]
            for c, a, listed in zip(completions, _answers(answer, n), _listed(possible_boxed_answers, n))]


def tool_call_parseable(completions: Sequence[Any], answer: Any = None, possible_boxed_answers: Any = None,
                        **kwargs: Any) -> list[float]:
    """Format credit: calls to functions the prompt lists, capped at the expected number, over max(expected,
    produced) (``format_credit``). Text without a call earns 0.0 where a call is expected."""
    return _batch("tool_call_parseable", completions, answer, possible_boxed_answers)


def tool_call_function(completions: Sequence[Any], answer: Any, **kwargs: Any) -> list[float]:
    """F1 between the multisets of predicted and expected function names."""
    return _batch("tool_call_function", completions, answer)


def tool_call_params(completions: Sequence[Any], answer: Any, **kwargs: Any) -> list[float]:
    """F1 between the multisets of (function, argument, value) triples; a call without arguments is the one triple
    (function, None, None), so no call earns nothing where such a call is due (``argument_facts``)."""
    return _batch("tool_call_params", completions, answer)


def tool_call_exact(completions: Sequence[Any], answer: Any, **kwargs: Any) -> list[float]:
    """1.0 iff the multisets of calls are equal (argument order ignored), else 0.0."""
    return _batch("tool_call_exact", completions, answer)


def tool_call_overall(completions: Sequence[Any], answer: Any, **kwargs: Any) -> list[float]:
    """0.4·function + 0.4·params + 0.2·exact."""
    return _batch("tool_call_overall", completions, answer)


def make_calibrated_overall(rule: CalibrationConfig):
    """``tool_call_overall`` as the informativeness of a tagged answer: overall − λ·(conf/100 − overall)²."""

    def informativeness(statuses, completions, answer=None, **_: Any) -> list[float]:
        return [score_completion(c, a)["tool_call_overall"]
                for c, a in zip(completions, _answers(answer, len(completions)))]

    return make_calibrated_reward(informativeness, rule, name="calibrated_overall")


REWARD_FUNCTIONS: dict[str, Callable[..., list[float]]] = {
    "tool_call_parseable": tool_call_parseable,
    "tool_call_function": tool_call_function,
    "tool_call_params": tool_call_params,
    "tool_call_exact": tool_call_exact,
    "tool_call_overall": tool_call_overall,
}
