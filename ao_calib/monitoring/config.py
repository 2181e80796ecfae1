"""The alerts' thresholds (``alerts.*``)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

from ao_calib.core.settings import Checked, above, at_least, setting, within


@dataclass
class AlertsConfig(Checked):
    """Failure-mode alerts while an online trainer (GRPO, RLOO, PPO) trains: each fires once, after ``patience``
    logged steps in a row, and is printed, logged as ``alert/<name>`` and listed in summary.json. The thresholds
    are the oracle's standard monitoring list. One more, ``calibration_regressed``, is checked once at the
    end of a run: the main stage's stated confidence against the warm-up's, on the same held-out rows; and one,
    ``too_short_to_learn``, at start-up: a training stage cut to a small fraction of its preset's steps."""

    advantage_std_below: float = setting(1e-3, "Every group scored alike (no learning signal) below this "
                                         "advantage std.", allowed=at_least(0))
    kl_above: float = setting(1.0, "Drifting from the reference above this KL: lower the lr or raise beta.",
                              allowed=above(0))
    confidence_std_below: float = setting(0.1, "(Tasks that state a confidence) confidences collapsed to one value "
                                          "below this std.", allowed=at_least(0))
    answer_length_drop: float = setting(0.5, "(Same) mean answer length fell below this fraction of its first "
                                        "value.", allowed=within(0, 1))
    patience: int = setting(3, "Consecutive logged steps a condition must hold (one noisy step is not a failure).",
                            allowed=at_least(1))
    auroc_drop_after_warmup: float = setting(
        0.1, "(Tasks that state a confidence, with a warm-up) At the end of the run: the main stage's evaluation "
        "ranks right over wrong worse than the warm-up's did, on the same held-out rows, by more than this AUROC.",
        allowed=within(0, 1))
    ece_rise_after_warmup: float = setting(
        0.05, "(Same) At the end of the run: the main stage's evaluation ECE above the warm-up's by more than this.",
        allowed=within(0, 1))
    short_run_fraction: float = setting(
        0.1, "A training stage set to fewer steps than this fraction of its preset's (max_steps as the experiment, "
        "recipe or trainer group sets it, before the command line's max_steps overrides) is too short to learn "
        "what the preset teaches: alert too_short_to_learn at start-up and in the closing block. 0: never.",
        allowed=within(0, 1))
    judge_outage_stop_after: Optional[int] = setting(
        5, "Logged steps in a row with every judged sample masked (the judge is down) after which the run stops as "
        "\"failed\", naming the judge and its last error; null: alert only.", allowed=at_least(1))
