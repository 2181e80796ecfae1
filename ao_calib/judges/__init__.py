"""Judges score how informative an oracle's answer is, in [0, 1]; ``None`` means "no judgment" (masked)."""

from __future__ import annotations

from omegaconf import DictConfig

from ao_calib.errors import AOCalibError, NotImplementedYetError
from ao_calib.judges.base import Judge, JudgeItem
from ao_calib.judges.label import LabelJudge

__all__ = ["Judge", "JudgeItem", "LabelJudge", "build_judge"]


def build_judge(cfg: DictConfig) -> Judge:
    name = cfg.judge.name
    if name == "label":
        return LabelJudge()
    if name in ("litellm", "local"):
        raise NotImplementedYetError(f"judge={name} is not implemented yet (tracked in issue #4); use judge=label")
    raise AOCalibError(f"judge={name} cannot score oracle answers; use judge=label")
