"""The oracle's GRPO reward: a judge scores the informativeness of each answer (the text after the tag), and the
shared calibration rule turns it and the stated confidence into the reward. Failed judgments are masked (None)."""

from __future__ import annotations

from ao_calib.calibration import CalibrationConfig, make_calibrated_reward
from ao_calib.judges import Judge, JudgeItem


def make_oracle_reward(judge: Judge, rule: CalibrationConfig):
    async def informativeness(statuses, completions, answer, question, source_prompt, log_metric=None,
                              answer_drawn_from=None, **_):
        # a row that names the answers its label was drawn from uniformly (task.rl_rows.expected_over_draw) is scored
        # against each of them and takes the mean: the score's expectation over the draw, without its noise
        labels = [list(drawn or []) or [a] for a, drawn in zip(answer, answer_drawn_from or [None] * len(answer))]
        items = [JudgeItem(prompt=p, question=q, answer=s.answer, label=label)
                 for p, q, s, row_labels in zip(source_prompt, question, statuses, labels) for label in row_labels]
        flat = await judge.score(items)
        scores, at = [], 0
        for row_labels in labels:
            row = flat[at:at + len(row_labels)]
            at += len(row_labels)
            scores.append(None if any(x is None for x in row) else sum(row) / len(row))  # a failed judgment masks
        if log_metric is not None:
            for name, value in judge.pop_step_stats().items():
                log_metric(name, value)
        return scores

    return make_calibrated_reward(informativeness, rule, name="calibration")
