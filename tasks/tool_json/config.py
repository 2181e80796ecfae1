"""``task=tool_json`` settings (``cfg.task``); every default is stated here."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Optional

from ao_calib.calibration import CONFIDENCE_INSTRUCTION, CalibrationConfig
from ao_calib.config import TaskConfig


@dataclass
class ToolJsonGeneratedDataConfig:
    """The offline generator used when no data files are given (ao_calib_tasks.tool_json.generate)."""

    n: int = 2000  # rows in all, before the held-out split
    seed: int = 0
    test_fraction: float = 0.1


@dataclass
class ToolJsonDataConfig:
    # The tool-calling design notes' schema, as a JSON array or JSONL (ao_calib_tasks.tool_json.data);
    # null -> generated data
    train_path: Optional[str] = None
    test_path: Optional[str] = None
    generate: ToolJsonGeneratedDataConfig = field(default_factory=ToolJsonGeneratedDataConfig)


@dataclass
class ToolJsonTaskConfig(TaskConfig):
    data: ToolJsonDataConfig = field(default_factory=ToolJsonDataConfig)
    # Used when the reward mix trains a stated confidence (reward=calibrated_tool_json).
    calibration: CalibrationConfig = field(default_factory=CalibrationConfig)
    confidence_instruction: str = CONFIDENCE_INSTRUCTION
