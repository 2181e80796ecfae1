"""judge=local: the base model itself (adapter disabled) grades answers with the judge prompt, offline."""

from __future__ import annotations

import contextlib
from collections.abc import Sequence

import torch

from ao_calib.core.errors import AOCalibError
from ao_calib.judges.base import Judge, JudgeContext, JudgeItem, note_failure, to_settings
from ao_calib.judges.config import LocalJudgeConfig
from ao_calib.judges.litellm_judge import parse_score


class LocalJudge(Judge):
    config_class = LocalJudgeConfig

    def __init__(self, settings: LocalJudgeConfig, context: JudgeContext):
        super().__init__()
        if context.model is None:
            raise AOCalibError("judge=local needs the model: build the task's data before its rewards")
        self.prompt = settings.prompt or context.default_prompt
        if not self.prompt:
            raise AOCalibError("judge.prompt is null and the task has no grading prompt: set judge.prompt")
        self.model, self.tokenizer = context.model, context.tokenizer
        self.max_new_tokens, self.batch_size = settings.max_new_tokens, settings.batch_size
        self.chat_template_kwargs = context.chat_template_kwargs

    @classmethod
    def from_config(cls, cfg, context: JudgeContext) -> LocalJudge:
        return cls(to_settings(cfg), context)

    async def score(self, items: Sequence[JudgeItem]) -> list[float | None]:
        # Generation runs on the caller's thread: TRL awaits rewards on its own loop, and the model is idle then.
        texts = [self.tokenizer.apply_chat_template(
            [{"role": "user", "content": self.prompt.format(prompt=i.prompt, question=i.question, answer=i.answer)}],
            tokenize=False, add_generation_prompt=True, **self.chat_template_kwargs) for i in items]
        replies = self._generate(texts)
        scores = [parse_score(reply) for reply in replies]
        self.stats.calls += len(items)
        self.stats.failures += sum(s is None for s in scores)
        if None in scores:
            note_failure("local (the base model)", "reply without a score in range")
        return scores

    @torch.no_grad()
    def _generate(self, texts: list[str]) -> list[str]:
        model, tokenizer = self.model, self.tokenizer
        disable = model.disable_adapter() if hasattr(model, "disable_adapter") else contextlib.nullcontext()
        was_training, side = model.training, tokenizer.padding_side
        model.eval()
        tokenizer.padding_side = "left"
        replies: list[str] = []
        try:
            with disable:
                for start in range(0, len(texts), self.batch_size):
                    batch = tokenizer(texts[start : start + self.batch_size], return_tensors="pt", padding=True,
                                      add_special_tokens=False).to(next(model.parameters()).device)
                    out = model.generate(**batch, max_new_tokens=self.max_new_tokens, do_sample=False,
                                         pad_token_id=tokenizer.pad_token_id)
                    replies += tokenizer.batch_decode(out[:, batch["input_ids"].shape[1]:], skip_special_tokens=True)
        finally:
            model.train(was_training)
            tokenizer.padding_side = side
        return replies
