"""``task=tool_json`` settings (``cfg.task``); every default is stated here."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Optional

from ao_calib.calibration import StatedConfidenceTaskConfig


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
class ToolJsonTaskConfig(StatedConfidenceTaskConfig):
    """Also ``calibration`` and ``confidence_instruction``, used when the reward mix trains a stated confidence."""

    data: ToolJsonDataConfig = field(default_factory=ToolJsonDataConfig)
