"""Judges score how informative an answer is, in [0, 1]; ``None`` means "no judgment" (masked). Built from
``cfg.judge`` by the class its ``_target_`` names: ``label``, ``litellm`` and ``local`` ship here, and a judge
from any other package plugs in the same way."""

from __future__ import annotations

from ao_calib.core.errors import AOCalibError
from ao_calib.core.plugins import plugin_class
from ao_calib.judges.base import Judge, JudgeContext, JudgeItem, judge_now
from ao_calib.judges.label import LabelJudge

__all__ = ["Judge", "JudgeContext", "JudgeItem", "LabelJudge", "build_judge", "judge_now"]


def build_judge(judge_cfg, context: JudgeContext | None = None) -> Judge | None:
    """The judge ``judge_cfg._target_`` names (None for ``judge=none``)."""
    cls = plugin_class("judge", getattr(judge_cfg, "_target_", None))
    if cls is None:
        return None
    if not (isinstance(cls, type) and issubclass(cls, Judge)):
        raise AOCalibError(f"judge._target_={judge_cfg._target_} is not a subclass of ao_calib.judges.Judge")
    return cls.from_config(judge_cfg, context or JudgeContext())
