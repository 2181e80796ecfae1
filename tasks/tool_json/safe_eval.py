"""Arithmetic for the calculator tool, evaluated without ever running code.

Completions are model output, so an expression may be hostile
(``__import__('os').system(...)``) or merely ruinous (``9**9**9**9``,
``'a'*10**9``). Evaluation therefore happens in two stages, and both must pass:

1. A static check of the parsed AST admits only numbers (int or float, not
   bool or complex), the operators ``+ - * / // % **``, unary ``-``/``+`` and
   parentheses. No names, calls, attributes, subscripts or strings. The text
   is at most :data:`MAX_EXPRESSION_CHARS` long and literals are bounded.
2. :class:`simpleeval.SimpleEval`, with no names or functions and an operator
   table in which every operation checks its inputs and result: a power is
   refused *before* it is computed when its exponent exceeds
   :data:`MAX_EXPONENT` or its result would exceed :data:`MAX_MAGNITUDE`
   (estimated from logarithms), and every result above that magnitude or not
   finite is refused.

Because every intermediate value is at most 1e100 and the text is short, no
admitted expression can take long or use much memory; no timer is needed
(``signal.alarm`` would only work on the main thread anyway). simpleeval's own
``MAX_POWER`` is a module-wide global other code may rely on, so it is left
alone and the tighter limits live in this module's operator table.

:func:`safe_eval` returns the number, or ``None`` for anything invalid or unsafe.
"""

from __future__ import annotations

import ast
import math
import operator
from collections.abc import Callable
from typing import Final

from simpleeval import SimpleEval

MAX_EXPRESSION_CHARS: Final = 500
MAX_NODES: Final = 400
MAX_DEPTH: Final = 150  # keeps simpleeval's recursion (two frames a level) far from Python's limit
MAX_EXPONENT: Final = 100
MAX_MAGNITUDE: Final = 1e100

Number = int | float


class UnsafeExpression(ValueError):
    """Raised inside evaluation when an operation would break a limit."""


_BINOPS: Final = (ast.Add, ast.Sub, ast.Mult, ast.Div, ast.FloorDiv, ast.Mod, ast.Pow)
_UNARYOPS: Final = (ast.USub, ast.UAdd)


def _check_number(value: object) -> Number:
    """Admit a finite int or float no larger than MAX_MAGNITUDE; refuse anything else (bool, complex, ...)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise UnsafeExpression(f"not a real number: {type(value).__name__}")
    if isinstance(value, float) and not math.isfinite(value):
        raise UnsafeExpression("not finite")
    if abs(value) > MAX_MAGNITUDE:
        raise UnsafeExpression("magnitude too large")
    return value


def _checked(fn: Callable[[Number, Number], Number]) -> Callable[[Number, Number], Number]:
    def op(a: Number, b: Number) -> Number:
        return _check_number(fn(_check_number(a), _check_number(b)))

    return op


def _power(a: Number, b: Number) -> Number:
    """``a ** b``, refused before computing when the exponent or the result's size is out of bounds."""
    a, b = _check_number(a), _check_number(b)
    if abs(b) > MAX_EXPONENT:
        raise UnsafeExpression("exponent too large")
    if a != 0 and b * math.log10(abs(a)) > math.log10(MAX_MAGNITUDE):
        raise UnsafeExpression("power too large")
    return _check_number(a**b)  # a negative base with a fractional exponent gives complex: refused here


def _unary(fn: Callable[[Number], Number]) -> Callable[[Number], Number]:
    return lambda a: _check_number(fn(_check_number(a)))


OPERATORS: Final[dict[type, Callable]] = {
    ast.Add: _checked(operator.add),
    ast.Sub: _checked(operator.sub),
    ast.Mult: _checked(operator.mul),
    ast.Div: _checked(operator.truediv),
    ast.FloorDiv: _checked(operator.floordiv),
    ast.Mod: _checked(operator.mod),
    ast.Pow: _power,
    ast.USub: _unary(operator.neg),
    ast.UAdd: _unary(operator.pos),
}


def _statically_safe(tree: ast.Expression) -> bool:
    """True iff the tree holds only bounded numeric literals and the admitted operators, within size limits."""
    stack: list[tuple[ast.AST, int]] = [(tree.body, 1)]
    nodes = 0
    while stack:
        node, depth = stack.pop()
        nodes += 1
        if nodes > MAX_NODES or depth > MAX_DEPTH:
            return False
        if isinstance(node, ast.Constant):
            value = node.value
            if isinstance(value, bool) or not isinstance(value, (int, float)):
                return False
            if isinstance(value, float) and not math.isfinite(value):
                return False
            if abs(value) > MAX_MAGNITUDE:
                return False
        elif isinstance(node, ast.BinOp):
            if not isinstance(node.op, _BINOPS):
                return False
            stack += [(node.left, depth + 1), (node.right, depth + 1)]
        elif isinstance(node, ast.UnaryOp):
            if not isinstance(node.op, _UNARYOPS):
                return False
            stack.append((node.operand, depth + 1))
        else:
            return False
    return True


def parse_expression(expression: object) -> ast.Expression | None:
    """The expression's AST if it is a string within the limits that passes the static check, else None."""
    if not isinstance(expression, str) or len(expression) > MAX_EXPRESSION_CHARS:
        return None
    text = expression.strip()
    if not text:
        return None
    try:
        tree = ast.parse(text, mode="eval")
    except (SyntaxError, ValueError, MemoryError, RecursionError):
        return None
    return tree if _statically_safe(tree) else None


def safe_eval(expression: object) -> Number | None:
    """Evaluate an arithmetic expression; ``None`` when it is invalid, unsafe or out of bounds.

    >>> safe_eval("2 * (3 + 4)")
    14
    >>> safe_eval("9**9**9**9") is None
    True
    """
    tree = parse_expression(expression)
    if tree is None:
        return None
    evaluator = SimpleEval(operators=dict(OPERATORS), functions={}, names={})
    try:
        return _check_number(evaluator.eval(str(expression), previously_parsed=tree.body))
    except (ArithmeticError, UnsafeExpression, RecursionError, MemoryError):
        return None
    except Exception:  # any other simpleeval refusal (InvalidExpression and kin) means "not valid"
        return None


def numbers_close(a: float, b: float) -> bool:
    """Equality used throughout the rewards: relative tolerance 1e-6, absolute 1e-9 near zero."""
    try:
        return math.isclose(a, b, rel_tol=1e-6, abs_tol=1e-9)
    except OverflowError:
        return False
