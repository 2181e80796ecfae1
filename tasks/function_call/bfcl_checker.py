"""BFCL's AST check, reimplemented: is a completion a correct answer to a BFCL case?

The Berkeley Function Calling Leaderboard (ShishirPatil/gorilla, ``berkeley-function-call-leaderboard``,
Apache-2.0) scores a prompting model in two steps, both mirrored here from their documented behaviour:

1. **Decode** (:func:`decode`): the text, stripped of surrounding backticks, newlines and spaces, and wrapped in
   ``[...]`` when it is not already, must parse as one Python expression: a call or a list of calls with keyword
   arguments. Prose or a fenced block with a language tag around the call therefore fails, as it does in BFCL.
   ``strict_format=False`` instead takes the first decodable fenced block or line.
2. **Check** (:func:`check`) each call against the function's JSON schema and the case's ``possible_answer``
   (``{func: {param: [acceptable values]}}``; ``""`` among them means the parameter may be left out): the name
   must match, required parameters be present, no parameter be unknown or absent from the answer, each value's
   type match the schema (an ``int`` passes for ``float``; a ``tuple`` for ``tuple``), and each value be one of
   the acceptable ones, strings compared after BFCL's standardisation (case, spaces and ``,./-_*^`` ignored).

The deliberate differences from BFCL (see BENCHMARKS.md for the measured agreement):

* Parallel calls are matched to the expected ones by a maximum bipartite matching, so a correct answer in any
  order passes. BFCL matches first-fit and can reject a correct answer when one call fits two expected slots.
* Nothing is evaluated. BFCL ``eval``s arithmetic (``a=2*3``) and lambdas in arguments; here arithmetic on
  number literals is computed by a small interpreter and anything else of that kind fails to decode.

As in BFCL, positional arguments are dropped (``f(5, b=1)`` passes when the dropped parameter may be omitted),
a bare name is read as a string (``unit=celsius`` is ``"celsius"``) and a nested call as its source text.

An empty ground truth is BFCL's ``irrelevance`` category: no function fits, and the answer is right when it makes
no call, as in BFCL's relevance checker: an empty list, or text that does not decode as calls (an empty answer,
prose). Any decoded call is wrong there. Where calls are expected, an empty call list is wrong and earns no credit.

Only Python semantics are implemented (categories simple, multiple, parallel, parallel_multiple, their ``live_``
versions, and irrelevance); Java and JavaScript cases are refused at load time.
"""

from __future__ import annotations

import ast
import operator
import re
from collections import Counter
from dataclasses import dataclass
from typing import Any

from .parsing import callee_name

MAX_TEXT_CHARS = 20_000
"""Longer completions are cut before parsing, so one runaway sample cannot stall a training step."""

SCHEMA_TYPES: dict[str, type] = {
    "string": str, "integer": int, "float": float, "boolean": bool,
    "array": list, "tuple": list, "dict": dict, "any": str,
}
"""BFCL's Python type for each JSON-schema type name its data uses (``any`` is checked as a string, as there)."""

NESTED_TYPES = ("array", "tuple")


class UndecodableError(ValueError):
    """The text is not a list of calls in BFCL's output format."""


# ------------------------------------------------------------------------------------------------ decode


def decode(text: str, strict_format: bool = True) -> list[dict[str, dict[str, Any]]]:
    """The calls in ``text`` as BFCL's ``[{name: {param: value}}]``; raises :class:`UndecodableError`."""
    text = text[:MAX_TEXT_CHARS]
    try:
        return _decode_exact(text)
    except UndecodableError:
        if strict_format:
            raise
    for candidate in _lenient_candidates(text):
        try:
            calls = _decode_exact(candidate)
        except UndecodableError:
            continue
        if calls:
            return calls
    raise UndecodableError("no call list found in the text")


def _decode_exact(text: str) -> list[dict[str, dict[str, Any]]]:
    body = text.strip("`\n ")
    if not body.startswith("["):
        body = "[" + body
    if not body.endswith("]"):
        body = body + "]"
    body = body.strip().strip("'")
    try:
        tree = ast.parse(body, mode="eval")
    except (SyntaxError, ValueError, RecursionError, MemoryError, OverflowError) as exc:
        raise UndecodableError(f"not a Python expression: {exc}") from None
    node = tree.body
    if isinstance(node, ast.Call):
        return [_call(node)]
    elements = getattr(node, "elts", None)
    if elements is None:
        raise UndecodableError(f"expected a list of calls, got {type(node).__name__}")
    calls = []
    for element in elements:
        if not isinstance(element, ast.Call):
            raise UndecodableError(f"list element is a {type(element).__name__}, not a call")
        calls.append(_call(element))
    return calls


_FENCE = re.compile(r"```[A-Za-z0-9_+-]*\n(.*?)```", re.DOTALL)


def _lenient_candidates(text: str):
    """Where a call may hide in a chatty answer: fenced blocks first, then single lines and the bracketed
    list within a line."""
    for match in _FENCE.finditer(text):
        yield match.group(1)
    for line in text.split("\n"):
        line = line.strip().rstrip(";")
        if "(" in line and len(line) <= 2_000:
            yield line
            if "[" in line and "]" in line:  # "Sure! [f(a=1)] is the call."
                yield line[line.index("["): line.rindex("]") + 1]


def _name(node: ast.expr) -> str:
    name = callee_name(node)
    if name is None:
        raise UndecodableError("the callee is not a (dotted) name")
    return name


def _call(node: ast.Call) -> dict[str, dict[str, Any]]:
    # Positional arguments are dropped, as BFCL's decoder drops them: a required one is then reported missing.
    args: dict[str, Any] = {}
    for keyword in node.keywords:
        if keyword.arg is None:
            raise UndecodableError("**kwargs in a call")
        args[keyword.arg] = _value(keyword.value)
    return {_name(node.func): args}


_ARITHMETIC = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul, ast.Div: operator.truediv,
               ast.FloorDiv: operator.floordiv, ast.Mod: operator.mod, ast.Pow: operator.pow}


def _value(node: ast.expr) -> Any:
    """An argument's value as BFCL's decoder reads it, without evaluating anything."""
    if isinstance(node, ast.Constant):
        return "..." if node.value is Ellipsis else node.value
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub) and isinstance(node.operand, ast.Constant):
        if isinstance(node.operand.value, (int, float, complex)):
            return -node.operand.value
    if isinstance(node, ast.List):
        return [_value(v) for v in node.elts]
    if isinstance(node, ast.Tuple):
        return tuple(_value(v) for v in node.elts)
    if isinstance(node, ast.Dict):
        if any(k is None for k in node.keys):
            raise UndecodableError("**mapping inside a dict")
        return {_value(k): _value(v) for k, v in zip(node.keys, node.values)}
    if isinstance(node, ast.Name):  # BFCL reads a bare name as the variable's name, a string
        return node.id
    if isinstance(node, ast.Call):  # a nested call: its source text, or a call dict when it has keywords
        return _call(node) if node.keywords else ast.unparse(node)
    if isinstance(node, ast.Subscript):
        return ast.unparse(node.value) + "[" + ast.unparse(node.slice) + "]"
    if isinstance(node, ast.BinOp) and type(node.op) in _ARITHMETIC:
        left, right = _value(node.left), _value(node.right)
        numbers = (int, float)
        # a bounded exponent keeps ``10**10**10`` from freezing the step
        if type(left) in numbers and type(right) in numbers and not (type(node.op) is ast.Pow and abs(right) > 64):
            try:
                return _ARITHMETIC[type(node.op)](left, right)
            except (ZeroDivisionError, OverflowError):
                pass
    raise UndecodableError(f"unsupported argument expression: {type(node).__name__}")


# ------------------------------------------------------------------------------------------------- check


@dataclass(frozen=True)
class Verdict:
    valid: bool
    error_type: str = ""
    error: str = ""


OK = Verdict(True)


def standardize(text: str) -> str:
    """BFCL's string comparison form: no spaces or ``,./-_*^``, lower case, single quotes as double."""
    return re.sub(r"[ ,./\-_*^]", "", text).lower().replace("'", '"')


def _std_list(values: list) -> list:
    return [standardize(v) if type(v) is str else v for v in values]


def _first_answer_type(acceptable: list) -> type | None:
    for value in acceptable:
        if value != "":
            return type(value)
    return None


def _type_check(value: Any, acceptable: list, expected: type, nested: type | None) -> tuple[bool, bool]:
    """``(valid, is_variable)``. A value of the acceptable values' type, when that differs from the schema's,
    is what BFCL calls a variable: accepted by type and then compared without standardisation."""
    answer_type = _first_answer_type(acceptable)
    is_variable = answer_type is not None and answer_type is not expected
    if type(value) is expected:
        if nested is None:
            return True, is_variable
        for candidate in acceptable:
            # BFCL checks item types against each acceptable list; a non-list candidate ("") passes
            if type(candidate) is not list or all(_type_check(v, candidate, nested, None)[0] for v in value):
                return True, is_variable
        return False, is_variable
    if answer_type is not None and type(value) is answer_type:
        return True, True
    return False, is_variable


def _dict_ok(value: Any, acceptable: list) -> bool:
    if type(value) is not dict:
        return False
    for candidate in acceptable:
        if candidate == "" or type(candidate) is not dict:
            continue
        if all(key in candidate and (standardize(v) if type(v) is str else v) in _std_list(candidate[key])
               for key, v in value.items()) and \
                all(key in value or "" in options for key, options in candidate.items()):
            return True
    return False


def _list_of_dicts_ok(value: list, acceptable: list) -> bool:
    for candidate in acceptable:
        if not isinstance(candidate, (list, str)) or len(candidate) != len(value):
            continue
        if all(_dict_ok(item, [expected]) for item, expected in zip(value, candidate)):
            return True
    return False


def _value_ok(param: str, value: Any, spec: dict, acceptable: list) -> Verdict:
    type_name = spec.get("type")
    if type_name not in SCHEMA_TYPES:
        return Verdict(False, "type_error:unknown_schema_type", f"{param}: schema type {type_name!r} is not supported")
    expected = SCHEMA_TYPES[type_name]
    nested = None
    if type_name in NESTED_TYPES:
        nested = SCHEMA_TYPES.get((spec.get("items") or {}).get("type"))
    if type_name == "tuple" and type(value) is tuple:
        value = list(value)
    if type_name == "float" and type(value) is int:  # Python would convert it on the call
        value = float(value)
    type_ok, is_variable = _type_check(value, acceptable, expected, nested)
    if not type_ok:
        return Verdict(False, "type_error", f"{param}: expected {type_name}, got {type(value).__name__} {value!r:.60}")
    if not is_variable:
        if expected is dict:
            ok = _dict_ok(value, acceptable)
        elif expected is list and nested is dict:
            ok = _list_of_dicts_ok(value, acceptable)
        elif expected is str:
            ok = standardize(value) in [standardize(a) for a in acceptable if type(a) is str]
        elif expected is list:
            ok = _std_list(value) in [_std_list(a) if isinstance(a, (list, str)) else None for a in acceptable]
        else:
            ok = value in acceptable
    else:
        ok = value in acceptable
    if not ok:
        return Verdict(False, "value_error", f"{param}: {value!r:.60} is not one of {acceptable!r:.120}")
    return OK


def check_call(function: dict, call: dict[str, dict], expected: dict[str, dict]) -> Verdict:
    """One decoded call against one expected ``{name: {param: [acceptable]}}`` and its function doc."""
    (name, acceptable_by_param), = expected.items()
    (called, args), = call.items()
    if called != name:
        return Verdict(False, "wrong_func_name", f"called {called!r}, expected {name!r}")
    schema = function.get("parameters") or {}
    properties = schema.get("properties") or {}
    for param in schema.get("required") or []:
        if param not in args:
            return Verdict(False, "missing_required", f"{name}: required parameter {param!r} missing")
    for param, value in args.items():
        if param not in properties or param not in acceptable_by_param:
            return Verdict(False, "unexpected_param", f"{name}: unexpected parameter {param!r}")
        verdict = _value_ok(f"{name}.{param}", value, properties[param], acceptable_by_param[param])
        if not verdict.valid:
            return verdict
    for param, acceptable in acceptable_by_param.items():
        if param not in args and "" not in acceptable:
            return Verdict(False, "missing_optional", f"{name}: parameter {param!r} missing (not optional here)")
    return OK


def _max_matching(fits: list[list[bool]]) -> int:
    """Size of a maximum matching of expected calls (rows) to output calls (columns); Kuhn's augmenting paths."""
    owner: dict[int, int] = {}

    def augment(row: int, seen: set[int]) -> bool:
        for col, fit in enumerate(fits[row]):
            if fit and col not in seen:
                seen.add(col)
                if col not in owner or augment(owner[col], seen):
                    owner[col] = row
                    return True
        return False

    return sum(augment(row, set()) for row in range(len(fits)))


def function_docs(functions: list[dict]) -> dict[str, dict]:
    return {f["name"]: f for f in functions}


IRRELEVANCE_ERROR = "irrelevance_error:decoder_success"
"""BFCL's error type for a call made where no function fits."""


def check(functions: list[dict], calls: list[dict], ground_truth: list[dict]) -> Verdict:
    """Decoded ``calls`` against a BFCL case: same number of calls, each matched to a distinct expected call.

    With one expected call this is BFCL's simple/multiple check; with several, its parallel check, order-free.
    With none (an irrelevance case), it is BFCL's irrelevance check: right only when no call was made.
    """
    if not ground_truth:
        if calls:
            return Verdict(False, IRRELEVANCE_ERROR, f"{len(calls)} calls where no function fits")
        return OK
    if len(calls) != len(ground_truth):
        return Verdict(False, "wrong_count", f"{len(calls)} calls, expected {len(ground_truth)}")
    docs = function_docs(functions)
    fits = [[check_call(docs[next(iter(e))], c, e).valid for c in calls] for e in ground_truth]
    if _max_matching(fits) == len(ground_truth):
        return OK
    if len(ground_truth) == 1:
        return check_call(docs[next(iter(ground_truth[0]))], calls[0], ground_truth[0])
    missing = [next(iter(e)) for e, row in zip(ground_truth, fits) if not any(row)]
    return Verdict(False, "cannot_match", f"no output call fits expected {missing or 'calls one-to-one'}")


def score_text(text: str, functions: list[dict], ground_truth: list[dict], strict_format: bool = True) -> Verdict:
    """Decode then check: BFCL's verdict on one completion. On an irrelevance case (empty ground truth) text that
    does not decode is right, as in BFCL: it makes no call."""
    try:
        calls = decode(text, strict_format)
    except UndecodableError as exc:
        return OK if not ground_truth else Verdict(False, "decoder_failed", str(exc))
    return check(functions, calls, ground_truth)


# ------------------------------------------------------------------------------------- partial credit
# Each credit is 0.0 for an empty call list where calls are expected, and 1.0 for it only where none is expected
# (irrelevance); any call on an irrelevance case earns 0.0.


def call_credit(functions: list[dict], calls: list[dict], ground_truth: list[dict]) -> float:
    """Matched calls / max(expected, produced): per-call partial credit under the optimal matching."""
    if not calls or not ground_truth:
        return float(not calls and not ground_truth)
    docs = function_docs(functions)
    fits = [[check_call(docs[next(iter(e))], c, e).valid for c in calls] for e in ground_truth]
    return _max_matching(fits) / max(len(calls), len(ground_truth))


def function_credit(calls: list[dict], ground_truth: list[dict]) -> float:
    """Expected function names among the produced calls (as multisets) / max(expected, produced): the first thing
    BFCL's check compares, credited before any argument is right."""
    if not calls or not ground_truth:
        return float(not calls and not ground_truth)
    produced = Counter(next(iter(c)) for c in calls)
    expected = Counter(next(iter(e)) for e in ground_truth)
    return sum((produced & expected).values()) / max(len(calls), len(ground_truth))


def param_credit(functions: list[dict], calls: list[dict], ground_truth: list[dict]) -> float:
    """Per-parameter partial credit: each expected call is paired with the same-named output call whose
    parameters fit best; a pair scores correct parameters / parameters named by either side (omittable ones
    left out count as correct). The total is averaged over max(expected, produced) calls."""
    if not calls or not ground_truth:
        return float(not calls and not ground_truth)
    docs = function_docs(functions)
    scores = [[_param_fraction(docs[next(iter(e))], c, e) for c in calls] for e in ground_truth]
    used: set[int] = set()
    total = 0.0
    # greedy on the best pairs first: exact for the small call counts BFCL has, and cheap
    pairs = sorted(((s, i, j) for i, row in enumerate(scores) for j, s in enumerate(row)), reverse=True)
    done: set[int] = set()
    for s, i, j in pairs:
        if i in done or j in used or s <= 0:
            continue
        done.add(i)
        used.add(j)
        total += s
    return total / max(len(calls), len(ground_truth))


def _param_fraction(function: dict, call: dict, expected: dict) -> float:
    (name, acceptable_by_param), = expected.items()
    (called, args), = call.items()
    if called != name:
        return 0.0
    properties = (function.get("parameters") or {}).get("properties") or {}
    names = set(args) | {p for p, options in acceptable_by_param.items() if "" not in options}
    if not names:
        return 1.0
    correct = 0
    for param in names:
        if param in args and param in properties and param in acceptable_by_param:
            correct += _value_ok(param, args[param], properties[param], acceptable_by_param[param]).valid
    return correct / len(names)
