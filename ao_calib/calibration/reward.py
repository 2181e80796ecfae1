"""The calibration reward, ``informativeness − λ·(confidence/100 − informativeness)²``, for every task that asks
for a confidence: the rule (``task.calibration``), one score, and the wrapper that turns a task's
informativeness into a TRL reward function with the ``calibration/*`` step metrics."""

from __future__ import annotations

import inspect
import math
import statistics
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from ao_calib.calibration.contract import CONFIDENCE_INSTRUCTION, EpistemicStatus, parse_epistemic_status
from ao_calib.calibration.metrics import auroc, binarize, expected_calibration_error, murphy_decomposition
from ao_calib.core.plugins import TaskConfig
from ao_calib.core.settings import Checked, at_least, one_of, setting
from ao_calib.rewards import completion_text


CREDIT_RULES = ("sequence", "calibration", "group", "probability")


@dataclass
class CalibrationConfig(Checked):
    """``task.calibration``: the rule every confidence-stating task scores with."""

    config_key = "task.calibration"

    lam: float = setting(0.5, "λ in informativeness − λ·(confidence/100 − informativeness)²: how much a "
                         "miscalibrated confidence costs.", allowed=at_least(0))
    untagged_penalty: float = setting(
        0.0, "A completion without a valid tag scores the formula at confidence 50, so the judge's informativeness "
        "still counts, minus this penalty: a push towards the format.",
        allowed=at_least(0))
    credit: str = setting(
        "sequence", "Which advantage the stated number's tokens get in GRPO: sequence (the completion's own, as "
        "published), calibration (the group-normalised −(confidence/100 − informativeness)² of its completion), "
        "group (against the group's mean) or probability (against the policy's odds). See docs/concepts/oracle.md.",
        allowed=one_of(*CREDIT_RULES))
    credit_scale: str = setting(
        "batch", "How the number's advantages (credit calibration, group or probability) are scaled after centring "
        "in each group: batch (by the batch's std), group (by each group's own std, TRL's scale_rewards) or none. "
        "Why not group: docs/concepts/oracle.md.", allowed=one_of("batch", "group", "none"))
    number_only: bool = setting(
        False, "With credit calibration, group or probability: true gives every token but the number's an advantage "
        "of 0, so GRPO moves the stated number alone (a KL term still reaches every token); false: the other tokens "
        "keep the whole reward's advantage.")

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.number_only and self.credit == "sequence":
            raise ValueError("task.calibration.number_only=true needs the number's own credit: set "
                             "task.calibration.credit=calibration, group or probability (with sequence every "
                             "token shares one advantage, so there is no number-only advantage to keep)")


@dataclass
class StatedConfidenceTaskConfig(TaskConfig):
    """Base schema of a task whose reward mix may train a stated confidence it was never taught (function calling,
    tool JSON): the rule, and the instruction appended to each prompt asking for the tag when it does."""

    calibration: CalibrationConfig = setting(factory=CalibrationConfig, help="The calibration reward's rule.")
    confidence_instruction: str = setting(CONFIDENCE_INSTRUCTION, "Appended to each prompt, asking for the tag, "
                                          "when the reward mix trains a stated confidence.")


def calibration_reward(informativeness: float, confidence: float, lam: float) -> float:
    """``informativeness − λ·(confidence/100 − informativeness)²``: be informative, and say how sure you are."""
    return informativeness - lam * (confidence / 100.0 - informativeness) ** 2


def brier_term(informativeness: float, confidence: float) -> float:
    return (confidence / 100.0 - informativeness) ** 2


def tagged_reward(informativeness: float, status: EpistemicStatus, rule: CalibrationConfig) -> float:
    """The calibration reward of one completion under ``rule``: an untagged one has confidence 50
    (``parse_epistemic_status``) and pays ``rule.untagged_penalty``."""
    reward = calibration_reward(informativeness, status.confidence, rule.lam)
    return reward if status.parsed else reward - rule.untagged_penalty


# informativeness(statuses, completions, log_metric=None, **dataset columns) -> one score in [0, 1] (or None:
# masked) per completion
Informativeness = Callable[..., "list[float | None]"]


def make_calibrated_reward(informativeness: Informativeness, rule: CalibrationConfig, name: str):
    """A TRL reward function named ``name``: parses each completion's tag, asks ``informativeness`` (sync or
    async) how good the answers are, scores them under ``rule`` and logs the ``calibration/*`` figures.

    The function keeps its rule (``reward.rule``) and, after each call, what it scored each completion on
    (``reward.scored``: (stated confidence in [0, 1] or None when untagged, informativeness or None when masked))
    and the answer it read in each (``reward.answers``), from which a trainer credits the confidence tokens when
    ``rule.credit`` asks (``ao_calib.trainers.credit``)."""

    def finish(statuses, infos, log_metric):
        if log_metric is not None:
            log_step_metrics(log_metric, statuses, infos)
        reward.scored = [(s.confidence / 100 if s.parsed else None, info) for info, s in zip(infos, statuses)]
        reward.answers = [s.answer for s in statuses]
        return [None if info is None else tagged_reward(info, s, rule) for info, s in zip(infos, statuses)]

    if inspect.iscoroutinefunction(informativeness):
        async def reward(completions, log_metric=None, **columns):
            statuses = [parse_epistemic_status(completion_text(c)) for c in completions]
            infos = await informativeness(statuses, list(completions), log_metric=log_metric, **columns)
            return finish(statuses, infos, log_metric)
    else:
        def reward(completions, log_metric=None, **columns):
            statuses = [parse_epistemic_status(completion_text(c)) for c in completions]
            infos = informativeness(statuses, list(completions), log_metric=log_metric, **columns)
            return finish(statuses, infos, log_metric)

    reward.__name__ = reward.__qualname__ = name
    reward.rule = rule
    reward.scored = []
    reward.answers = []
    return reward


def log_step_metrics(log_metric: Callable[[str, float], Any], statuses: Sequence[EpistemicStatus],
                     informativeness: Sequence[float | None]) -> None:
    """The per-step calibration figures of one generation batch; masked samples (None) are left out of the
    judged ones."""
    if not statuses:
        return
    confidences = [s.confidence / 100 for s in statuses]
    judged = [(i, s) for i, s in zip(informativeness, statuses) if i is not None]
    log_metric("calibration/confidence_mean", statistics.fmean(confidences))
    log_metric("calibration/confidence_std", statistics.pstdev(confidences))
    log_metric("calibration/parse_failure_rate", sum(not s.parsed for s in statuses) / len(statuses))
    log_metric("calibration/answer_length", statistics.fmean(len(s.answer) for s in statuses))
    log_metric("calibration/masked_fraction", 1 - len(judged) / len(statuses))
    if judged:
        log_metric("calibration/informativeness", statistics.fmean(i for i, _ in judged))
        log_metric("calibration/brier", statistics.fmean(brier_term(i, s.confidence) for i, s in judged))
        # the per-example figures of the evaluation, on this batch's samples: does confidence rank right over wrong?
        confidence, correct = [s.confidence / 100 for _, s in judged], binarize([i for i, _ in judged])
        log_metric("calibration/resolution", murphy_decomposition(confidence, correct).resolution)
        log_metric("calibration/ece", expected_calibration_error(confidence, correct))
        # AUROC over tagged samples only: an untagged one gets confidence 50 and is usually wrong, which would
        # flatter the ranking while junk lasts
        tagged = [(i, s) for i, s in judged if s.parsed]
        auroc_value = auroc([s.confidence / 100 for _, s in tagged], [i for i, _ in tagged]) if tagged else math.nan
        if math.isfinite(auroc_value):  # undefined on a batch that is all right or all wrong
            log_metric("calibration/auroc", auroc_value)
