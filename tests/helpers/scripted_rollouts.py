"""A scripted model for GRPO rollouts with tools (the tiny Qwen3 with LoRA whose sampling follows a script; the loss
pass is the real model's), and one training step that records what the loss read: shared by the tests of TRL's tool
loop and of the project's multi-turn rollouts."""

from __future__ import annotations

import torch
from datasets import Dataset

from ao_calib.config.compose import compose_run_config, typed
from ao_calib.models import loading as models
from ao_calib.models.config import ModelConfig
from ao_calib.rewards import RewardPhase, RewardSchedule
from ao_calib.runs.run_dir import RunDir
from ao_calib.task_api import TaskData
from ao_calib.tools import Tools, chat_format
from ao_calib.trainers import TrainerSetup, build_trainer
from ao_calib.trainers.config import GRPOTrainerConfig

CALLS: list[str] = []


def calculator(expression: str) -> str:
    """Evaluates arithmetic.

    Args:
        expression: The expression.
    """
    CALLS.append(expression)
    return str(sum(int(term) for term in expression.split("+")))


def answered(completions, **kwargs) -> list[float]:
    return [1.0 if '"final"' in str(c[-1].get("content", "")) else 0.0 for c in completions]


class Script:
    """What the scripted model writes after a prompt: a calculator call after the user's turn, the tool's result as a
    final answer after a tool turn (``always_call``: another call, every time)."""

    def __init__(self, tokenizer, always_call: bool = False):
        self.tokenizer, self.always_call, self.sampled = tokenizer, always_call, []

    def reply(self, prompt_text: str) -> str:
        last = prompt_text.rsplit("<|im_start|>", 2)[-2]
        if last.startswith("tool\n") and not self.always_call:
            return '{"final": "' + last[len("tool\n"):].split("<|im_end|>")[0] + '"}<|im_end|>'
        return '{"tool": "calculator", "args": {"expression": "2+3"}}<|im_end|>'

    def generate(self, input_ids, attention_mask=None, **kwargs):
        rows = []
        for ids, mask in zip(input_ids, attention_mask):
            prompt = ids[mask.bool()].tolist()
            out = self.tokenizer(self.reply(self.tokenizer.decode(prompt)), add_special_tokens=False)["input_ids"]
            self.sampled.append((prompt, out))
            rows.append(ids.tolist() + out)
        width = max(len(r) for r in rows)
        return torch.tensor([r + [self.tokenizer.pad_token_id] * (width - len(r)) for r in rows])


def calculator_setup(tmp_path) -> TrainerSetup:
    """Two prompts asking 2+3, the calculator as the task's tools, a reward for answering."""
    cfg = compose_run_config(["model=tiny_qwen3", "task=tool_json"])
    settings = typed(cfg.model, ModelConfig)
    source = models.model_source(settings, cfg.paths.cache_dir)
    tokenizer = models.load_tokenizer(source, settings)
    chat_format.install(tokenizer, chat_format.JSON_TOOL_CALL, "test")
    torch.manual_seed(0)
    model = models.attach_lora(models.load_base_model(settings, source), settings)
    rows = Dataset.from_list([{"prompt": [{"role": "user", "content": f"What is 2+3? ({i})"}]} for i in range(2)])
    schedule = RewardSchedule(("answered",), (RewardPhase(None, (1.0,)),))
    data = TaskData(rows, rows, tools=Tools((calculator,), 4))
    return TrainerSetup(settings, model, tokenizer, data, RunDir(tmp_path),
                        schedule, {"answered": answered})


def stage(**overrides) -> GRPOTrainerConfig:
    return GRPOTrainerConfig(**{"max_steps": 1, "batch_size": 2, "num_generations": 2, "max_completion_length": 96,
                                "fast_generation": False, "beta": 0.0, "logging_steps": 1, "save_steps": 100,
                                **overrides})


def run_one_step(setup, script: Script, settings: GRPOTrainerConfig) -> dict:
    trainer = build_trainer(setup, settings, "train")
    trainer.accelerator.unwrap_model(trainer.model).generate = script.generate
    seen = {}
    compute_loss = trainer._compute_loss

    def recording(model, inputs):
        seen.update({k: inputs[k].clone() for k in ("prompt_ids", "prompt_mask", "completion_ids",
                                                     "completion_mask", "tool_mask")})
        return compute_loss(model, inputs)

    trainer._compute_loss = recording
    trainer.train()
    return seen


def completion_rows(seen: dict) -> list[tuple[list[int], list[int]]]:
    """(completion ids, tool mask) of each row, padding dropped."""
    rows = []
    for ids, keep, tool in zip(seen["completion_ids"], seen["completion_mask"], seen["tool_mask"]):
        n = int(keep.sum())
        rows.append((ids[:n].tolist(), tool[:n].tolist()))
    return rows


