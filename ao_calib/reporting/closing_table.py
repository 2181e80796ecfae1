"""The closing block's table of a run's evaluations, one row each: by default the figures a newcomer reads
(``eval.closing_table=headline``), every figure with ``full``, then a one-line legend of the columns shown and what
``nan`` and ``-`` mean."""

from __future__ import annotations

import math

from ao_calib.evaluation.config import ClosingTable

# (eval.json key, heading, what it means); a column shows when any evaluation reports it (a null included).
TABLE_COLUMNS = (
    ("accuracy", "acc", "accuracy"),
    ("control", "control", "on another prompt's activations"),
    ("none", "none", "on random vectors"),
    ("auroc", "AUROC", "the stated confidence ranks right over wrong (0.5: chance)"),
    ("auroc_within_question", "AUROC/q", "within one question text"),
    ("text_rule_auroc", "text rule", "AUROC of a rule reading only the question text"),
    ("ece", "ECE", "calibration error"),
    ("none_mean_confidence", "none conf", "mean confidence on random vectors"),
    ("none_ece", "none ECE", "ECE on random vectors"),
    ("brier", "Brier", "Brier score (binned: rel - res + uncertainty)"),
    ("reliability", "rel", "Brier's reliability term"),
    ("resolution", "res", "Brier's resolution term"),
    ("confidence_std", "conf std", "spread of the confidences"),
    ("selective_accuracy@50", "sel@50%", "accuracy of the most confident half"),
    ("selective_accuracy@80", "sel@80%", "accuracy of the most confident 80 %"),
    ("headroom", "headroom", "what a per-kind confidence could gain over the best constant"),
    ("parse_rate", "parsed", "answers read"),
    ("silent_tools", "silent", "with tools that return nothing"),
    ("right_call", "right call", "episodes with one call, to the right tool"),
    ("call_rate_needed", "calls/need", "episodes that call a tool where one is needed"),
    ("call_rate_not_needed", "calls/none", "... where none is needed"),
    ("tool_calls", "calls", "calls per episode"),
    ("tool_error_rate", "tool err", "calls whose result is an error"),
    ("turns", "turns", "the model's turns per episode"),
    ("valid_json", "JSON/turn", "the model's turns that are one JSON object"),
    ("empty_where_call_needed", "empty", "empty answers where a call was needed"),
)
# What eval.closing_table=headline shows: accuracy under each condition, ranking, calibration, parsing; a tool
# task's use of its tools.
HEADLINE = frozenset({"accuracy", "control", "none", "auroc", "auroc_within_question", "ece", "parse_rate",
                      "silent_tools", "call_rate_needed", "call_rate_not_needed", "tool_calls", "tool_error_rate",
                      "valid_json"})
# Per-category columns a task reports under a prefix (function calling: BFCL's AST accuracy per category); shown in
# both tables, as accuracy is.
PER_CATEGORY_PREFIXES = (("ast_accuracy/", "AST ", "BFCL AST accuracy per category"),)
NAN_MEANING = ("nan: not computable (an AUROC when every answer is right or every one wrong; a confidence figure when "
               "no answer states a number)")


def _columns(rows: list[tuple[str, dict]], table: ClosingTable) -> tuple[list[tuple[str, str, str]], list[str]]:
    """(the columns shown, the headings of those the headline table leaves out)."""
    reported = [c for c in TABLE_COLUMNS if any(c[0] in m for _, m in rows)]
    shown = [c for c in reported if table == ClosingTable.full or c[0] in HEADLINE]
    shown += [(key, head + key[len(prefix):], meaning) for prefix, head, meaning in PER_CATEGORY_PREFIXES
              for key in sorted({k for _, m in rows for k in m if k.startswith(prefix)})]
    return shown, [head for key, head, meaning in reported if (key, head, meaning) not in shown]


def _cell(metrics: dict, key: str) -> str:
    value = metrics.get(key)
    if key in metrics and (value is None or (isinstance(value, float) and math.isnan(value))):
        return "nan"  # reported, not computable: null in eval.json, NaN in memory
    return format(value, ".3f") if isinstance(value, (int, float)) else "-"


def evaluation_table(rows: list[tuple[str, dict]], table: ClosingTable = ClosingTable.headline) -> list[str]:
    """The table's lines, the legend under them."""
    columns, left_out = _columns(rows, table)
    width = max([len("evaluation"), *(len(tag) for tag, _ in rows)])
    widths = [max(9, len(head) + 1) for _, head, _ in columns]
    lines = [f" {'evaluation':<{width}}" + "".join(f"{head:>{w}}" for (_, head, _), w in zip(columns, widths))]
    cells = [[_cell(metrics, key) for key, _, _ in columns] for _, metrics in rows]
    for (tag, _), row in zip(rows, cells):
        lines.append(f" {tag:<{width}}" + "".join(f"{c:>{w}}" for c, w in zip(row, widths)))
    return lines + ["", *legend(columns, {c for row in cells for c in row}, left_out)]


def legend(columns: list[tuple[str, str, str]], cells: set[str], left_out: list[str]) -> list[str]:
    """One line naming each column shown; what nan and - mean where a cell is one; what the full table adds."""
    per_category = [c for c in columns if any(c[0].startswith(p) for p, _, _ in PER_CATEGORY_PREFIXES)]
    named = [f"{head}: {meaning}" for key, head, meaning in columns if (key, head, meaning) not in per_category]
    named += [f"AST <category>: {per_category[0][2]}"] if per_category else []
    lines = [" " + "; ".join(named)]
    if "nan" in cells:
        lines.append(f" {NAN_MEANING}")
    if "-" in cells:
        lines.append(" -: not reported by that evaluation")
    if left_out:
        lines.append(f" eval.closing_table=full adds {', '.join(left_out)} (every figure is in eval.json)")
    return lines
