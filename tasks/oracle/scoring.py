"""How the oracle's answers are scored: a yes/no reference checks the answer, a judge scores every other row, and
an evaluation's records are aggregated into calibration figures."""

from __future__ import annotations

import logging
import re
from collections.abc import Callable

from ao_calib.calibration import CalibrationConfig, parse_epistemic_status, scored_confidence, tagged_reward
from ao_calib.calibration.metrics import CORRECT_AT
from ao_calib.judges import JudgeItem, judge_now
from ao_calib.judges.label import yes_no
from ao_calib.runs.run_dir import RunDir
from ao_calib.task_api import calibration_figures

from .rows.oracle import checked_against_reference, is_open_class, names_class

log = logging.getLogger(__name__)

JudgeAnswers = Callable[[list[dict], list[str]], list[float | None]]  # each answer's informativeness (None: masked)
TRAINING_TAGS = re.compile(r"initial|warmup|(\w+_)?step\d+")  # the evaluations before, during and between stages


def scores_held_out_rows(tag: str) -> bool:
    """Whether an evaluation is one the baselines are computed beside: the run's final one, or one a saved run is
    given (``python -m ao_calib.eval run_dir=RUN tag=NAME``), not those during training."""
    return tag == RunDir.FINAL or not TRAINING_TAGS.fullmatch(tag)


def score_one(completion: str, row: dict, rule: CalibrationConfig) -> dict[str, float]:
    """One completion of a row with a yes/no reference answer, or a class (``checked_against_reference``), against
    it."""
    if not checked_against_reference(row):
        raise ValueError(f"score_one: the reference {row['answer']!r} is not yes/no; such a row is judged")
    status = parse_epistemic_status(completion)
    correct = float(names_class(status.answer, row["answer"]) if is_open_class(row)
                    else yes_no(status.answer) == yes_no(row["answer"]))
    return {
        "correct": correct,
        "confidence": status.confidence / 100 if status.parsed else None,  # null: no tag, counted as 0.5
        "parsed": float(status.parsed),
        "calibration_reward": tagged_reward(correct, status, rule),
    }


def score(completions: list[str], rows: list[dict], rule: CalibrationConfig,
          judge_answers: JudgeAnswers) -> list[dict[str, float]]:
    """Each row by the rule ``checked_against_reference`` names: a yes/no reference answer is checked against
    the yes/no the answer opens with; every other row (no reference, as WildChat's, or an open one) is scored
    by the judge (``judge_answers(rows, answers)``), in one batched call through its cache, so re-evaluating the
    same answers costs no judge call. A masked judgment (judge=label on an open reference, a failed call) leaves the
    sample out of the calibration figures and is counted (``judge_failed``)."""
    judged = [i for i, r in enumerate(rows) if not checked_against_reference(r)]
    scores = [score_one(c, r, rule) if checked_against_reference(r) else None for c, r in zip(completions, rows)]
    if not judged:
        return scores
    statuses = {i: parse_epistemic_status(completions[i]) for i in judged}
    infos = judge_answers([rows[i] for i in judged], [statuses[i].answer for i in judged])
    for i, info in zip(judged, infos):
        status = statuses[i]
        base = {"confidence": status.confidence / 100 if status.parsed else None, "parsed": float(status.parsed)}
        if info is None:
            scores[i] = {**base, "judge_failed": 1.0}
        else:
            scores[i] = {**base, "informativeness": info, "correct": float(info >= CORRECT_AT),
                         "calibration_reward": tagged_reward(info, status, rule), "judge_failed": 0.0}
    return scores


def judge_answers(judge, rows: list[dict], answers: list[str]) -> list[float | None]:
    """The judge's informativeness of each answer to its row's question, outside training (evaluation, the
    format warm-up); the judge's counters for this call are logged, not carried into a training step."""
    items = [JudgeItem(prompt=r["source_prompt"], question=r["question"], answer=a, label=r["answer"])
             for r, a in zip(rows, answers)]
    infos = judge_now(judge, items)
    stats = judge.pop_step_stats()
    failed = sum(i is None for i in infos)
    if failed:
        log.warning("judge: %d of %d answers could not be judged (%s); they are left out of the figures",
                    failed, len(infos), ", ".join(f"{k} {v:g}" for k, v in stats.items()))
    return infos


def aggregate(records: list[dict], run_dir: RunDir, tag: str) -> dict[str, float]:
    """Rows checked against a yes/no reference: calibration against correctness. Judged rows (WildChat, open
    references): calibration against the judge's informativeness (AUROC at informativeness >= 0.5, Brier
    against the score itself). Both kinds together: each row's own outcome (``checked_against_reference``)."""
    parse_rate = sum(r["scores"]["parsed"] for r in records) / max(len(records), 1)
    judged = [r for r in records if "informativeness" in r["scores"]]
    failed = sum(r["scores"].get("judge_failed", 0.0) for r in records)
    scored = [r for r in records if "correct" in r["scores"]]  # a masked judgment has neither
    if not scored:
        return {"parse_rate": parse_rate, "judge_failed": failed, "accuracy": float("nan")}
    outcomes = [r["scores"].get("informativeness", r["scores"]["correct"]) for r in scored]
    metrics = calibration_figures(scored, [scored_confidence(r["scores"]["confidence"]) for r in scored],
                                  outcomes, run_dir, tag)
    metrics["parse_rate"] = parse_rate
    metrics["calibration_reward"] = sum(r["scores"]["calibration_reward"] for r in scored) / len(scored)
    if judged:
        metrics["informativeness"] = sum(outcomes) / len(outcomes)
        metrics["judge_failed"] = failed
    return metrics
