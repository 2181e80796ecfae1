"""The trainer classes that several trainers build on: GRPO and PPO (a GRPOTrainer subclass, see ``ppo``) share
this base instead of importing each other."""

from __future__ import annotations

from trl import GRPOTrainer

from ao_calib.trainers.common import CompletionSamplesMixin
from ao_calib.trainers.credit import ConfidenceCreditMixin
from ao_calib.trainers.fast_generation import FastGenerationMixin


class AOGRPOTrainer(ConfidenceCreditMixin, CompletionSamplesMixin, FastGenerationMixin, GRPOTrainer):
    """GRPOTrainer that records sampled completions, takes curriculum reward weights and credits a stated
    confidence by its calibration term when the calibration rule asks (``task.calibration.credit``)."""
