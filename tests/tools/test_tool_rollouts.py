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

from ao_calib.core.errors import AOCalibError
from ao_calib.tools import Tools
from ao_calib.trainers import build_trainer
from ao_calib.trainers.config import PPOTrainerConfig
from tests.helpers.scripted_rollouts import (
    CALLS,
    Script,
    calculator,
    calculator_setup,
    completion_rows,
    run_one_step,
    stage,
)


@pytest.fixture
def setup(tmp_path):
    return calculator_setup(tmp_path)


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
