"""The trainer classes that several trainers build on: GRPO and PPO (a GRPOTrainer subclass, see ``ppo``) share
this base instead of importing each other."""

from __future__ import annotations

from trl import GRPOTrainer

from ao_calib.models.fast_generation import FastGenerationMixin
from ao_calib.tools.rollouts import RolloutRowsMixin
from ao_calib.trainers.common import CompletionSamplesMixin
from ao_calib.trainers.credit import ConfidenceCreditMixin
from ao_calib.trainers.shared_prefix import SharedPrefixMixin


class AOGRPOTrainer(ConfidenceCreditMixin, CompletionSamplesMixin, RolloutRowsMixin, FastGenerationMixin,
                    SharedPrefixMixin, GRPOTrainer):
    """GRPOTrainer that records sampled completions, takes curriculum reward weights, credits a stated
    confidence by its calibration term when the calibration rule asks (``task.calibration.credit``) and, with
    ``trainer.shared_prefix=true``, runs each distinct prompt of a loss pass once; a task's multi-turn episodes
    read their rows (``RolloutRowsMixin``)."""
