"""Turn model output into Python-style function calls, safely.

The reward functions and the data loader both need to know which calls a text
contains. We read them with :mod:`ast` only: a text is *parsed*, never evaluated,
so a completion such as ``__import__('os').system(...)`` can do no harm and
simply yields no call (its callee is not a plain name and its argument is not
a literal).

Positional arguments are kept by position under the keys ``"0"``, ``"1"``, ...
because the parser does not know the function's signature; so ``f(5)`` and
``f(n=5)`` are different calls. Keyword arguments keep their names. Arguments
are stored in source order (positional first, as Python requires).
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from typing import Any

from ao_calib.rewards import completion_text  # noqa: F401  (part of this module's API)

MAX_TEXT_CHARS = 20_000
"""Longer texts are truncated before parsing, so one huge completion cannot stall a training step."""

MAX_LINE_CHARS = 2_000
"""Longer lines are skipped: no sensible call is that long, and the parser's cost grows with length."""


@dataclass(frozen=True)
class Call:
    """One parsed call: a (possibly dotted) function name and its literal arguments.

    ``args`` holds ``(key, value)`` pairs; positional arguments use the keys
    ``"0"``, ``"1"``, ... Values are plain Python literals (they may be lists or
    dicts, so hash a :class:`Call` only if you know its values are hashable).
    """

    name: str
    args: tuple[tuple[str, Any], ...] = ()

    @property
    def kwargs(self) -> dict[str, Any]:
        """The arguments as a dict (keys as in ``args``)."""
        return dict(self.args)


def parse_calls(text: str) -> list[Call]:
    """Return the calls in ``text``, one per line (or a BFCL-style list of them per line), in order.

    Each line (stripped, trailing ``;`` removed) counts when it is exactly one
    call, or a list ``[f(a=1), g(b=2)]`` of such calls, whose callee is a name or dotted name and whose arguments are all
    literals. Anything else on a line (prose, nested calls, variables,
    ``*args``/``**kwargs``, assignments) yields nothing from that line. If no
    line gives a call, the whole text is tried as well, so a call spread over
    several lines (``f(\\n  a=1)``) is still found.
    """
    if not isinstance(text, str):
        text = completion_text(text)
    text = text[:MAX_TEXT_CHARS]
    calls: list[Call] = []
    for line in text.split("\n"):
        calls.extend(_parse_line(line))
    if calls:
        return calls
    return _parse_block(text)


def _clean(line: str) -> str:
    line = line.strip()
    while line.endswith(";"):
        line = line[:-1].rstrip()
    return line


def _parse_line(line: str) -> list[Call]:
    """The call on a line, or the calls of a line in BFCL's list format ``[f(a=1), g(b=2)]``."""
    line = _clean(line)
    if not line or len(line) > MAX_LINE_CHARS or "(" not in line:
        return []
    tree = _safe_parse(line, "eval")
    if not isinstance(tree, ast.Expression):
        return []
    return _to_calls(tree.body)


def _to_calls(node: ast.expr) -> list[Call]:
    """A call, or a list/tuple of calls (all of them, or none when one element is not a valid call)."""
    if isinstance(node, (ast.List, ast.Tuple)):
        calls = [_to_call(e) for e in node.elts]
        return calls if calls and None not in calls else []
    call = _to_call(node)
    return [call] if call is not None else []


def _parse_block(text: str) -> list[Call]:
    """Whole-text fallback: every top-level statement must be a valid call.

    Code fences (lines starting with three backticks) are dropped first, since
    models often wrap a multi-line call in them.
    """
    body = "\n".join(l for l in text.split("\n") if not l.strip().startswith("```"))
    body = body.strip()
    if "(" not in body:
        return []
    tree = _safe_parse(body, "exec")
    if not isinstance(tree, ast.Module) or not tree.body:
        return []
    calls = []
    for stmt in tree.body:
        found = _to_calls(stmt.value) if isinstance(stmt, ast.Expr) else []
        if not found:
            return []
        calls.extend(found)
    return calls


def _safe_parse(source: str, mode: str) -> ast.AST | None:
    """``ast.parse`` that turns every failure (syntax, depth, size) into ``None``."""
    try:
        return ast.parse(source, mode=mode)
    except (SyntaxError, ValueError, RecursionError, MemoryError, OverflowError):
        return None


def callee_name(node: ast.expr) -> str | None:
    """``f`` or ``a.b.f`` as a string; ``None`` for anything else (calls, subscripts...)."""
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if not isinstance(node, ast.Name):
        return None
    parts.append(node.id)
    return ".".join(reversed(parts))


def _literal(node: ast.expr) -> tuple[bool, Any]:
    try:
        return True, ast.literal_eval(node)
    except (ValueError, TypeError, SyntaxError, RecursionError, MemoryError):
        return False, None


def _to_call(node: ast.expr) -> Call | None:
    if not isinstance(node, ast.Call):
        return None
    name = callee_name(node.func)
    if name is None:
        return None
    args: list[tuple[str, Any]] = []
    for i, arg in enumerate(node.args):
        if isinstance(arg, ast.Starred):
            return None
        ok, value = _literal(arg)
        if not ok:
            return None
        args.append((str(i), value))
    seen: set[str] = set()
    for kw in node.keywords:
        if kw.arg is None or kw.arg in seen:  # **kwargs, or a repeated keyword (Python rejects it too)
            return None
        seen.add(kw.arg)
        ok, value = _literal(kw.value)
        if not ok:
            return None
        args.append((kw.arg, value))
    return Call(name=name, args=tuple(args))
