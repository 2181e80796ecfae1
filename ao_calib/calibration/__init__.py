"""Calibration, shared by every task that asks for a confidence: the ``[epistemic status: NN]`` contract
(``contract``), the reward and its rule (``reward``), metrics and reliability plots (``metrics``), and the
collapse alerts (``alerts``)."""

from ao_calib.calibration.contract import (CONFIDENCE_INSTRUCTION, DEFAULT_CONFIDENCE, EpistemicStatus,
                                           format_epistemic_status, parse_epistemic_status,
                                           scored_confidence)
from ao_calib.calibration.reward import (CalibrationConfig, StatedConfidenceTaskConfig, brier_term, calibration_reward,
                                         make_calibrated_reward, tagged_reward)

__all__ = ["CONFIDENCE_INSTRUCTION", "DEFAULT_CONFIDENCE", "CalibrationConfig", "EpistemicStatus", "StatedConfidenceTaskConfig", "brier_term",
           "calibration_reward", "format_epistemic_status", "make_calibrated_reward", "parse_epistemic_status",
           "scored_confidence", "tagged_reward"]
