"""``task=function_call`` settings (``cfg.task``); every default is stated here."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Optional

from ao_calib.calibration import StatedConfidenceTaskConfig


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
class FunctionCallTaskConfig(StatedConfidenceTaskConfig):
    """Also ``calibration`` and ``confidence_instruction``, used when the reward mix trains a stated confidence."""

    data: FunctionCallDataConfig = field(default_factory=FunctionCallDataConfig)
