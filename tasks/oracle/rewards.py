"""The oracle's GRPO reward: a judge scores the informativeness of each answer (the text after the tag), and the
shared calibration rule turns it and the stated confidence into the reward. Failed judgments are masked (None)."""

from __future__ import annotations

from ao_calib.calibration import CalibrationConfig, make_calibrated_reward
from ao_calib.judges import Judge, JudgeItem


def make_oracle_reward(judge: Judge, rule: CalibrationConfig):
    async def informativeness(statuses, completions, answer, question, source_prompt, log_metric=None, **_):
        items = [JudgeItem(prompt=p, question=q, answer=s.answer, label=a)
                 for p, q, s, a in zip(source_prompt, question, statuses, answer)]
        scores = await judge.score(items)
        if log_metric is not None:
            for name, value in judge.pop_step_stats().items():
                log_metric(name, value)
        return scores

    return make_calibrated_reward(informativeness, rule, name="calibration")
