"""Per-dataset and pooled figures of every confidence method, side by side, from evaluation prediction rows.

A row is one answer of one evaluation condition::

    {"dataset": "sst2", "question": ..., "condition": "own" | "other" | "none",
     "scores": {"correct": 0/1, "confidence": 0.8 | null, ...},   # null: no tag, counted as 0.5
     "baselines": {"logprob": 0.93, "probe": 0.71, ...},         # each a confidence in [0, 1]
     "baseline_correct": {"probe": 1},                            # optional: a method that answers for itself
     "in_distribution": true}                                     # or name the OOD sets in ``ood_datasets``

Accuracy is given per condition; the confidence figures (mean confidence, AUROC, within-question AUROC, ECE,
Brier; ``ao_calib.calibration.metrics``) are of the ``own`` rows, for the stated number (``STATED``) and every
baseline. A baseline's confidence is scored against the answer it is a confidence in: the row's own answer
(``scores.correct``), or, for a method that gives its own answer (a probe, a sampled mode), ``baseline_correct``,
whose mean is then that method's accuracy. Groups: each dataset, then the in-distribution and the
out-of-distribution datasets pooled (rows of a question are compared only within their own dataset).
"""

from __future__ import annotations

import math
from collections.abc import Collection, Iterable
from typing import Any

from ao_calib.calibration.contract import scored_confidence
from ao_calib.calibration.metrics import (auroc, binarize, brier_score, expected_calibration_error,
                                          within_group_auroc)

STATED = "stated"  # the method name of the confidence stated in the tag
CONDITIONS = ("own", "none", "other")  # the order accuracies are reported in
IN_DISTRIBUTION, OUT_OF_DISTRIBUTION = "in_distribution", "out_of_distribution"
FIGURES = ("mean_confidence", "auroc", "auroc_within_question", "ece", "brier")
YES_NO = "yes_no"  # the question_form of a row that says none


def _field(row: dict, index: int, *path: str) -> Any:
    value: Any = row
    for key in path:
        if not isinstance(value, dict) or key not in value:
            raise ValueError(f"row {index}: no field {'.'.join(path)}")
        value = value[key]
    return value


def _confidence(value: Any, index: int, name: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value <= 1:
        raise ValueError(f"row {index}: {name} must be a number in [0, 1], got {value!r}")
    return float(value)


def _checked(rows: Iterable[dict]) -> list[dict]:
    """The rows that carry an outcome (a masked judgment carries none and is left out, as the task's figures leave
    it), each checked for the fields the figures read."""
    kept = []
    for index, row in enumerate(rows):
        _field(row, index, "dataset")
        condition = _field(row, index, "condition")
        if condition not in CONDITIONS:
            raise ValueError(f"row {index}: condition must be one of {CONDITIONS}, got {condition!r}")
        scores = _field(row, index, "scores")
        if "correct" not in scores:
            continue
        if scores.get("confidence") is not None:
            _confidence(scores["confidence"], index, "scores.confidence")
        for name, value in (row.get("baselines") or {}).items():
            _confidence(value, index, f"baselines.{name}")
        for name, value in (row.get("baseline_correct") or {}).items():
            _confidence(value, index, f"baseline_correct.{name}")
        kept.append(row)
    return kept


def ood_names(rows: list[dict], ood_datasets: Collection[str] | None) -> set[str]:
    """The out-of-distribution datasets: ``ood_datasets`` when given, else those whose rows say
    ``in_distribution: false`` (every row must then say it, and a dataset's rows alike)."""
    if ood_datasets is not None:
        return set(ood_datasets)
    flags: dict[str, bool] = {}
    for index, row in enumerate(rows):
        flag = row.get("in_distribution")
        if not isinstance(flag, bool):
            raise ValueError(f"row {index}: no boolean field in_distribution, and no ood_datasets were named")
        if flags.setdefault(row["dataset"], flag) != flag:
            raise ValueError(f"row {index}: dataset {row['dataset']!r} has rows both in and out of distribution")
    return {name for name, flag in flags.items() if not flag}


def grouped(rows: Iterable[dict], ood_datasets: Collection[str] | None = None
            ) -> dict[str, dict[str, list[dict]]]:
    """``{"datasets": {name: rows}, "pooled": {IN_DISTRIBUTION: rows, OUT_OF_DISTRIBUTION: rows}}`` of the rows
    that carry an outcome (a pooled group without rows is left out), datasets in the order their rows first come."""
    rows = _checked(rows)
    return _groups(rows, ood_names(rows, ood_datasets))


def _groups(rows: list[dict], ood: set[str]) -> dict[str, dict[str, list[dict]]]:
    datasets: dict[str, list[dict]] = {}
    for row in rows:
        datasets.setdefault(row["dataset"], []).append(row)
    pooled = {IN_DISTRIBUTION: [r for r in rows if r["dataset"] not in ood],
              OUT_OF_DISTRIBUTION: [r for r in rows if r["dataset"] in ood]}
    subsets: dict[str, list[dict]] = {}
    for row in rows:  # a dataset pooled from several files or groups (geometry_of_truth's, relations')
        if row.get("subset"):
            subsets.setdefault(f"{row['dataset']}/{row['subset']}", []).append(row)
    return {"datasets": datasets, "pooled": {name: group for name, group in pooled.items() if group},
            "subsets": subsets}


def method_names(rows: list[dict]) -> list[str]:
    """``STATED``, then every baseline any row carries, in the order first met."""
    names = dict.fromkeys(name for row in rows for name in (row.get("baselines") or {}))
    return [STATED, *names]


def method_scores(rows: list[dict], method: str) -> tuple[list[float], list[float], list[str]]:
    """(confidences, outcomes, question keys) of ``method`` on the rows that carry it: the stated number (an
    untagged answer counts as ``scored_confidence`` counts it, 0.5) against the answer's score (a judge's
    informativeness where there is one), or a baseline against the answer it is a confidence in."""
    confidences, outcomes, questions = [], [], []
    for row in rows:
        scores = row["scores"]
        if method == STATED:
            confidence = scored_confidence(scores.get("confidence"))
        elif method in (row.get("baselines") or {}):
            confidence = float(row["baselines"][method])
        else:
            continue
        own = (row.get("baseline_correct") or {}).get(method)
        outcomes.append(float(own) if own is not None else float(scores.get("informativeness", scores["correct"])))
        confidences.append(confidence)
        questions.append(f"{row['dataset']}\x1f{row.get('question')}")
    return confidences, outcomes, questions


def method_figures(rows: list[dict], method: str, n_bins: int = 10) -> tuple[dict[str, Any], list[str]]:
    """(``method``'s figures on ``rows``, why any of them is undefined, in words)."""
    confidences, outcomes, questions = method_scores(rows, method)
    if not confidences:
        return {"n": 0}, [f"{method}: no row carries it"]
    correct = binarize(outcomes)
    figures: dict[str, Any] = {
        "n": len(confidences),
        "mean_confidence": sum(confidences) / len(confidences),
        "auroc": auroc(confidences, correct),
        "auroc_within_question": within_group_auroc(confidences, correct, questions),
        "ece": expected_calibration_error(confidences, correct, n_bins),
        "brier": brier_score(confidences, outcomes),
    }
    answers_itself = any(method in (r.get("baseline_correct") or {}) for r in rows)
    if answers_itself:
        figures["accuracy"] = float(correct.mean())
    notes = []
    if math.isnan(figures["auroc"]):
        whose = f"{method}'s own answers" if answers_itself else "the answers"
        notes.append(f"{method}: AUROC undefined: all {len(correct)} of {whose} are "
                     f"{'right' if correct.all() else 'wrong'}")
    elif math.isnan(figures["auroc_within_question"]):
        notes.append(f"{method}: within-question AUROC undefined: no question has both a right and a wrong answer")
    if len(confidences) < len(rows):
        notes.append(f"{method}: on {len(confidences)} of {len(rows)} own-condition rows")
    return figures, notes


def group_figures(rows: list[dict], n_bins: int = 10) -> dict[str, Any]:
    """One group's figures: rows and accuracy per condition, the untagged answers per condition, the mean stated
    confidence per condition, each method's figures on the own rows (with its accuracy where it answers for
    itself, also under ``accuracy``), and notes on any undefined figure."""
    by_condition = {c: [r for r in rows if r["condition"] == c] for c in CONDITIONS}
    by_condition = {c: group for c, group in by_condition.items() if group}
    own = by_condition.get("own", [])
    methods, notes = {}, [] if own else ["no own-condition rows: no confidence figures"]
    for name in method_names(own) if own else []:
        methods[name], method_notes = method_figures(own, name, n_bins)
        notes += method_notes
    accuracy = {c: float(binarize([r["scores"]["correct"] for r in group]).mean())
                for c, group in by_condition.items()}
    accuracy.update({name: figures["accuracy"] for name, figures in methods.items() if "accuracy" in figures})
    forms = {} if all(r.get("question_form") is None for r in rows) else {
        form: {c: float(binarize([r["scores"]["correct"] for r in group if question_form(r) == form]).mean())
               for c, group in by_condition.items() if any(question_form(r) == form for r in group)}
        for form in sorted({question_form(r) for r in rows})}
    return {
        "n": {c: len(group) for c, group in by_condition.items()},
        "datasets": sorted({r["dataset"] for r in rows}),
        "accuracy": accuracy,
        "untagged": {c: sum(r["scores"].get("confidence") is None for r in group)
                     for c, group in by_condition.items()},
        "mean_stated_confidence": {c: sum(scored_confidence(r["scores"].get("confidence")) for r in group)
                                   / len(group) for c, group in by_condition.items()},
        "methods": methods,
        "notes": notes,
        **({"accuracy_by_form": forms} if forms else {}),
        "text_only_accuracy": text_only_accuracy([r for r in own if question_form(r) == YES_NO]),
    }


def question_form(row: dict) -> str:
    """A row's ``question_form``: "yes_no" unless it says otherwise (an open question: "open")."""
    return row.get("question_form") or YES_NO


def text_only_accuracy(rows: list[dict]) -> float:
    """The best any rule reading the question text alone scores on ``rows``: each text's most frequent expected
    answer, counted on these very rows (an upper bound on what the wording tells); NaN without rows."""
    by_text: dict[str, dict[str, int]] = {}
    for row in rows:
        counts = by_text.setdefault(f"{row['dataset']}\x1f{row.get('question')}", {})
        counts[str(row.get("expected"))] = counts.get(str(row.get("expected")), 0) + 1
    return sum(max(c.values()) for c in by_text.values()) / len(rows) if rows else float("nan")


def dataset_figures(rows: Iterable[dict], ood_datasets: Collection[str] | None = None, n_bins: int = 10
                    ) -> dict[str, Any]:
    """The figures of every dataset, of every file or group a dataset pools (``subsets``, named dataset/subset, where
    rows say ``subset``) and of the in- and out-of-distribution pools (``group_figures`` each), for eval.json:
    ``{"datasets": {name: ...}, "pooled": {"in_distribution": ..., "out_of_distribution": ...},
    "ood_datasets": [the OOD sets with rows], "ood_datasets_absent": [named OOD sets without rows]}``. NaN
    marks an undefined figure (AUROC where every answer is right or wrong), with the reason in the group's notes."""
    rows = _checked(rows)
    ood = ood_names(rows, ood_datasets)
    groups = _groups(rows, ood)
    present = set(groups["datasets"])
    return {
        "datasets": {name: group_figures(group, n_bins) for name, group in groups["datasets"].items()},
        "pooled": {name: group_figures(group, n_bins) for name, group in groups["pooled"].items()},
        **({"subsets": {name: group_figures(group, n_bins) for name, group in groups["subsets"].items()}}
           if groups["subsets"] else {}),
        "ood_datasets": sorted(ood & present),
        "ood_datasets_absent": sorted(ood - present),
    }


# ------------------------------------------------------------------------------------------------ the table

def _number(value: Any) -> str:
    if value is None:
        return "-"
    return "n/a" if math.isnan(value) else f"{value:.3f}"


def figures_table(figures: dict[str, Any]) -> str:
    """Two markdown tables for a run's closing block: accuracy per group and condition (and of each method that
    answers for itself), then each method's confidence figures per group; an undefined figure reads ``n/a``, with
    the group's notes under the tables."""
    groups = [(name, g) for name, g in figures["datasets"].items()]
    groups += [(f"pooled {'ID' if name == IN_DISTRIBUTION else 'OOD'} ({len(g['datasets'])} "
                f"set{'s' if len(g['datasets']) > 1 else ''})", g)
               for name, g in figures["pooled"].items()]
    answering = list(dict.fromkeys(m for _, g in groups for m in g["accuracy"] if m not in CONDITIONS))
    head = ["group", "n", "acc own", "acc none", "acc other", *(f"{m} acc" for m in answering), "untagged"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for name, g in groups:
        cells = [name, str(g["n"].get("own", 0)), *(_number(g["accuracy"].get(c)) for c in CONDITIONS),
                 *(_number(g["accuracy"].get(m)) for m in answering), str(g["untagged"].get("own", 0))]
        lines.append("| " + " | ".join(cells) + " |")
    head = ["group", "method", "n", "mean conf", "AUROC", "AUROC within q", "ECE", "Brier"]
    lines += ["", "| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for name, g in groups:
        for method, m in g["methods"].items():
            cells = [name, method, str(m["n"]), *(_number(m.get(f)) for f in FIGURES)]
            lines.append("| " + " | ".join(cells) + " |")
    notes = [f"- {name}: {note}" for name, g in groups for note in g["notes"]]
    if figures.get("ood_datasets_absent"):
        notes.append(f"- OOD sets named but without rows: {', '.join(figures['ood_datasets_absent'])}")
    return "\n".join(lines + ([""] + notes if notes else []))


def readability_table(figures: dict[str, Any], probe: dict[str, float] | None = None) -> str:
    """Where the answers can be read and whether the stated number knows it, a row per dataset (each file or group
    of a pooled one under it) and pool: a linear probe's accuracy on validation rows (``probe``, when given), the
    yes/no and open-question accuracy under own / other / none activations, the best text-only rule's yes/no
    accuracy, and the stated number's mean, ECE and AUROC over every own row."""
    forms = (YES_NO, "open")
    head = ["group", "n", "probe (val)", *(f"{f} {c}" for f in ("yes/no", "open") for c in ("own", "other", "none")),
            "text-only", "mean conf", "acc", "ECE", "AUROC"]
    groups = [(name, g) for name, g in figures["datasets"].items()]
    groups += [(f"  {name}", g) for name, g in figures.get("subsets", {}).items()]
    groups += [(f"pooled {'ID' if name == IN_DISTRIBUTION else 'OOD'}", g) for name, g in figures["pooled"].items()]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for name, g in groups:
        by_form = g.get("accuracy_by_form") or {YES_NO: g["accuracy"]}
        stated = g["methods"].get(STATED, {})
        cells = [name, str(g["n"].get("own", 0)), _number((probe or {}).get(name)),
                 *(_number(by_form.get(f, {}).get(c)) for f in forms for c in ("own", "other", "none")),
                 _number(g.get("text_only_accuracy")), _number(stated.get("mean_confidence")),
                 _number(g["accuracy"].get("own")), _number(stated.get("ece")), _number(stated.get("auroc"))]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)
