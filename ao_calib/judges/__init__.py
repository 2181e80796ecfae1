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
    if name == "litellm":
        from ao_calib.judges.litellm_judge import LiteLLMJudge

        return LiteLLMJudge.from_config(cfg.judge)
    if name == "local":
        raise NotImplementedYetError("judge=local is not implemented yet (tracked in issue #4); use judge=label "
                                     "or judge=litellm")
    raise AOCalibError(f"judge={name} cannot score oracle answers; use judge=label")
