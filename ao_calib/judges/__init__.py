"""Judges score how informative an oracle's answer is, in [0, 1]; ``None`` means "no judgment" (masked)."""

from __future__ import annotations

from omegaconf import DictConfig

from ao_calib.errors import AOCalibError
from ao_calib.judges.base import Judge, JudgeItem
from ao_calib.judges.label import LabelJudge

__all__ = ["Judge", "JudgeItem", "LabelJudge", "build_judge"]


def build_judge(cfg: DictConfig, model=None, tokenizer=None) -> Judge:
    """The configured judge; judge=local grades with ``model`` (adapter disabled) and ``tokenizer``."""
    name = cfg.judge.name
    if name == "label":
        return LabelJudge()
    if name == "litellm":
        from ao_calib.judges.litellm_judge import LiteLLMJudge

        return LiteLLMJudge.from_config(cfg.judge)
    if name == "local":
        from omegaconf import OmegaConf

        from ao_calib.judges.local import LocalJudge

        if model is None:
            raise AOCalibError("judge=local needs the model: build the task's data before its rewards")
        return LocalJudge(model, tokenizer, cfg.judge.prompt, cfg.judge.max_new_tokens, cfg.judge.batch_size,
                          OmegaConf.to_container(cfg.model.chat_template_kwargs, resolve=True))
    raise AOCalibError(f"judge={name} cannot score oracle answers; use judge=label")
