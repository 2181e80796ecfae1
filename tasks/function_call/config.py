"""``task=function_call`` settings (``cfg.task``); every default is stated here."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Optional

from ao_calib.calibration import CONFIDENCE_INSTRUCTION, CalibrationConfig
from ao_calib.config import TaskConfig


@dataclass
class GeneratedDataConfig:
    """The offline generator used when no data files are given (ao_calib_tasks.function_call.generate)."""

    n_train: int = 512
    n_test: int = 64
    seed: int = 0


@dataclass
class FunctionCallDataConfig:
    # JSONL rows of prompt and answer (the function-calling design notes' format); null -> generated data
    train_path: Optional[str] = None
    test_path: Optional[str] = None
    generate: GeneratedDataConfig = field(default_factory=GeneratedDataConfig)
    max_train_samples: Optional[int] = None


@dataclass
class FunctionCallTaskConfig(TaskConfig):
    data: FunctionCallDataConfig = field(default_factory=FunctionCallDataConfig)
    # Used when the reward mix trains a stated confidence (reward=calibrated_function_call): the rule, and the
    # instruction appended to each prompt asking for the tag.
    calibration: CalibrationConfig = field(default_factory=CalibrationConfig)
    confidence_instruction: str = CONFIDENCE_INSTRUCTION
