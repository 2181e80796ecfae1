"""Tool calls inside GRPO rollouts, on TRL's own loop as the project's GRPO builder wires it
(``ao_calib.trainers.grpo.tool_kwargs``): a scripted model (the tiny Qwen3 with LoRA, whose sampling follows a
script; the loss pass is the real model's) calls the calculator, the tool runs and its result is in the next turn's
input, the loop stops at the task's bound (``Tools.max_rounds``), the tool result's tokens carry no loss, and the
completion ids the loss reads are the ids sampled (the tool result's tokens between them), never re-tokenised.
Settings that cannot see the tool mask are refused."""

from __future__ import annotations

import dataclasses
import importlib.util

import pytest
import torch
from datasets import Dataset

from ao_calib.config.compose import compose_run_config, typed
from ao_calib.core.errors import AOCalibError
from ao_calib.models import loading as models
from ao_calib.models.config import ModelConfig
from ao_calib.rewards import RewardPhase, RewardSchedule
from ao_calib.runs.run_dir import RunDir
from ao_calib.task_api import TaskData
from ao_calib.tools import Tools, chat_format
from ao_calib.trainers import TrainerSetup, build_trainer
from ao_calib.trainers.config import GRPOTrainerConfig, PPOTrainerConfig

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


@pytest.fixture
def setup(tmp_path):
    cfg = compose_run_config(["model=tiny_qwen3", "task=tool_json"])
    settings = typed(cfg.model, ModelConfig)
    source = models.model_source(settings, cfg.paths.cache_dir)
    tokenizer = models.load_tokenizer(source, settings)
    chat_format.install(tokenizer, chat_format.JSON_TOOL_CALL, "test")
    torch.manual_seed(0)
    model = models.attach_lora(models.load_base_model(settings, source), settings)
    rows = Dataset.from_list([{"prompt": [{"role": "user", "content": f"What is 2+3? ({i})"}]} for i in range(2)])
    schedule = RewardSchedule(("answered",), (RewardPhase(None, (1.0,)),))
    return TrainerSetup(settings, model, tokenizer, TaskData(rows, rows, tools=Tools((calculator,), 4)), RunDir(tmp_path),
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


def test_the_tool_runs_its_result_is_the_next_input_and_carries_no_loss(setup):
    CALLS.clear()
    script = Script(setup.tokenizer)
    seen = run_one_step(setup, script, stage())
    assert CALLS == ["2+3"] * 4  # each of 2 prompts x 2 completions called once
    tok = setup.tokenizer
    second_turns = [tok.decode(prompt) for prompt, _ in script.sampled[4:]]
    assert len(second_turns) == 4 and all(t.endswith("<|im_start|>tool\n5<|im_end|>\n<|im_start|>assistant\n")
                                          for t in second_turns)
    for ids, tool in completion_rows(seen):
        call = tok('{"tool": "calculator", "args": {"expression": "2+3"}}<|im_end|>', add_special_tokens=False)
        final = tok('{"final": "5"}<|im_end|>', add_special_tokens=False)["input_ids"]
        suffix = tok("\n<|im_start|>tool\n5<|im_end|>\n<|im_start|>assistant\n", add_special_tokens=False)
        # the sampled ids, then the tool result's, then the sampled ids: never decoded and encoded again
        assert ids == call["input_ids"] + suffix["input_ids"] + final
        assert tool == [1] * len(call["input_ids"]) + [0] * len(suffix["input_ids"]) + [1] * len(final)


def test_the_loop_stops_at_its_bound(setup):
    CALLS.clear()
    script = Script(setup.tokenizer, always_call=True)
    setup = dataclasses.replace(setup, data=dataclasses.replace(setup.data, tools=Tools((calculator,), 2)))
    seen = run_one_step(setup, script, stage())
    assert len(CALLS) == 4 * 2  # two rounds of calls run; the third turn's call is left unanswered
    assert len(script.sampled) == 4 * 3  # the first turn and a turn after each round, then the loop ends
    for ids, tool in completion_rows(seen):
        assert setup.tokenizer.decode(ids).count('"tool": "calculator"') == 3 and 0 in tool


@pytest.mark.skipif(importlib.util.find_spec("vllm") is None or not torch.cuda.is_available(),
                    reason="vLLM generation needs the vllm extra and a GPU")
def test_the_loop_runs_on_vllm_generation(setup):
    """trainer.use_vllm=true: TRL's tool loop generates every turn with vLLM (colocated); the task's tools are the
    trainer's and a step trains."""
    trainer = build_trainer(setup, stage(use_vllm=True), "train")
    assert trainer.use_vllm and [tool.__name__ for tool in trainer.tools] == ["calculator"]
    trainer.train()
    assert trainer.state.global_step == 1


@pytest.mark.parametrize(("settings", "message"), [
    (stage(greedy_member=True), "greedy_member"),
    (stage(shared_prefix=True), "shared_prefix"),
    (PPOTrainerConfig(max_steps=1, batch_size=2), "trainer=ppo samples single-turn completions"),
])
def test_settings_that_cannot_see_the_tool_mask_are_refused(setup, settings, message):
    with pytest.raises(AOCalibError, match=message):
        build_trainer(setup, settings, "train")
