"""The oracle's GRPO reward: a judge scores informativeness, the oracle's tag gives its confidence, and
reward = informativeness − λ·(confidence/100 − informativeness)². Failed judgments are masked (None)."""

from __future__ import annotations

import statistics

from ao_calib.calibration import brier_term, parse_epistemic_status, tagged_reward
from ao_calib.judges import Judge, JudgeItem
from ao_calib.completions import completion_text


def make_calibration_reward(judge: Judge, lam: float, unparsed_margin: float | None = 0.5):
    async def calibration(prompts, completions, answer, question, source_prompt, log_metric=None, **_):
        parsed = [parse_epistemic_status(completion_text(c)) for c in completions]
        items = [JudgeItem(prompt=p, question=q, answer=s.answer, label=a)
                 for p, q, s, a in zip(source_prompt, question, parsed, answer)]
        informativeness = await judge.score(items)
        rewards = [None if info is None else tagged_reward(info, s, lam, unparsed_margin)
                   for info, s in zip(informativeness, parsed)]
        if log_metric is not None:
            _log_step_metrics(log_metric, parsed, informativeness)
            for name, value in judge.pop_step_stats().items():
                log_metric(name, value)
        return rewards

    return calibration


def _log_step_metrics(log_metric, parsed, informativeness) -> None:
    confidences = [s.confidence / 100 for s in parsed]
    judged = [(i, s) for i, s in zip(informativeness, parsed) if i is not None]
    log_metric("oracle/confidence_mean", statistics.fmean(confidences))
    log_metric("oracle/confidence_std", statistics.pstdev(confidences))
    log_metric("oracle/parse_failure_rate", sum(not s.parsed for s in parsed) / len(parsed))
    log_metric("oracle/answer_length", statistics.fmean(len(s.answer) for s in parsed))
    log_metric("oracle/masked_fraction", 1 - len(judged) / len(parsed))
    if judged:
        log_metric("oracle/informativeness", statistics.fmean(i for i, _ in judged))
        log_metric("oracle/brier", statistics.fmean(brier_term(i, s.confidence) for i, s in judged))
