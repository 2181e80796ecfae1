"""Rewrite the string literals of a generated program in double quotes (``task.data.generate.double_quoted_code``).

Inside the JSON answer a double quote of the code must be escaped (``\\"``); Python's ``repr`` writes most strings
in single quotes, which need no escape, so a model fine-tuned on repr-quoted code sees the escape on few rows, copies
the double-quoted strings of the prompts into its code and breaks the JSON. Quoting every literal alike shows the
escape wherever the code holds a string. Only the quoting changes: each literal keeps its value (tested)."""

from __future__ import annotations

import ast
import io
import tokenize


def double_quoted_literal(value: str) -> str:
    """``value`` as a Python string literal in double quotes."""
    escaped = value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n").replace("\t", "\\t")
    return '"' + escaped + '"'


def double_quote_strings(code: str) -> str:
    """``code`` with every plain string literal (no prefix, not triple-quoted) written in double quotes; other
    tokens, spacing and comments unchanged."""
    lines = code.splitlines(keepends=True)
    starts = [0]
    for line in lines:
        starts.append(starts[-1] + len(line))
    pieces, last = [], 0
    for token in tokenize.generate_tokens(io.StringIO(code).readline):
        text = token.string
        if token.type != tokenize.STRING or text[0] not in "'\"" or text[:3] in ("'''", '"""'):
            continue
        begin = starts[token.start[0] - 1] + token.start[1]
        end = starts[token.end[0] - 1] + token.end[1]
        pieces += [code[last:begin], double_quoted_literal(ast.literal_eval(text))]
        last = end
    return "".join(pieces) + code[last:]
