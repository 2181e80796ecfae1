"""Rewrite the string literals of a generated program in one quote style (``task.data.generate.code_quotes``).

Inside the JSON answer a double quote of the code must be escaped (``\\"``), a single quote need not. The generator
writes its programs' strings as Python's ``repr`` does (mostly single quotes) plus a few double-quoted literals of
its templates, so a model fine-tuned on them sees both styles and the escape on few rows; it then copies the
double-quoted strings of the prompts into its code unescaped and breaks the JSON. One style for every literal makes
the rule uniform: ``single`` (never an escape) or ``double`` (the escape wherever the code holds a string). Only the
quoting changes: each literal keeps its value (tested)."""

from __future__ import annotations

import ast
import io
import tokenize

QUOTE_STYLES = ("repr", "single", "double")


def quoted_literal(value: str, quote: str) -> str:
    """``value`` as a Python string literal between ``quote`` characters (``'`` or ``"``)."""
    def escape(ch: str) -> str:
        if ch == "\\" or ch == quote:
            return "\\" + ch
        return repr(ch)[1:-1] if not ch.isprintable() else ch  # \n, \t, \x00 ... as Python writes them

    return quote + "".join(escape(ch) for ch in value) + quote


def requote_strings(code: str, style: str) -> str:
    """``code`` with every plain string literal (no prefix, not triple-quoted) written in ``style`` (``single`` or
    ``double`` quotes; ``repr`` leaves the code as it is); other tokens, spacing and comments unchanged."""
    if style not in QUOTE_STYLES:
        raise ValueError(f"quote style must be one of {QUOTE_STYLES}, got {style!r}")
    if style == "repr":
        return code
    quote = "'" if style == "single" else '"'
    lines = io.StringIO(code).readlines()  # the lines tokenize reads (str.splitlines would also split at \f, \x1c...)
    starts = [0]
    for line in lines:
        starts.append(starts[-1] + len(line))
    pieces, last = [], 0
    for token in tokenize.generate_tokens(iter(lines).__next__):
        text = token.string
        if token.type != tokenize.STRING or text[0] not in "'\"" or text[:3] in ("'''", '"""'):
            continue
        begin = starts[token.start[0] - 1] + token.start[1]
        end = starts[token.end[0] - 1] + token.end[1]
        pieces += [code[last:begin], quoted_literal(ast.literal_eval(text), quote)]
        last = end
    return "".join(pieces) + code[last:]
