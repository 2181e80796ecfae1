"""An SFT warm-up on whole episodes (``ao_calib.trainers.sft.tokenize_pairs`` on ``completion_messages`` rows): the
input is the prompt and the episode as generation sees them, the loss covers the model's turns (its call and its
answer) and none of the tool's result; a template without generation marks is refused."""

from __future__ import annotations

import json

import datasets
import pytest

from ao_calib.config.compose import compose_run_config, typed
from ao_calib.core.errors import AOCalibError
from ao_calib.models import loading as models
from ao_calib.models.config import ModelConfig
from ao_calib.tools import chat_format
from ao_calib.task_api import TRAJECTORY
from ao_calib.trainers.sft import tokenize_pairs

PROMPT = [{"role": "system", "content": "Answer in JSON."}, {"role": "user", "content": "What is 2+3?"}]
EPISODE = [{"role": "assistant", "content": "", "tool_calls": [
    {"type": "function", "function": {"name": "calculator", "arguments": {"expression": "2+3"}}}]},
    {"role": "tool", "name": "calculator", "content": "5"},
    {"role": "assistant", "content": '{"final": "5"}'}]


@pytest.fixture(scope="module")
def tokenizer():
    settings = typed(compose_run_config(["model=tiny_qwen3"]).model, ModelConfig)
    return models.load_tokenizer(models.model_source(settings, compose_run_config([]).paths.cache_dir), settings)


def test_the_loss_covers_the_models_turns_and_not_the_tools_result(tokenizer):
    chat_format.install(tokenizer, chat_format.JSON_TOOL_CALL, "test")
    rows = datasets.Dataset.from_list([{"prompt": PROMPT, TRAJECTORY: json.dumps(EPISODE)}])
    row = tokenize_pairs(rows, tokenizer, {}, 512)[0]
    generation_sees = tokenizer.apply_chat_template(PROMPT, tokenize=False, add_generation_prompt=True)
    text = tokenizer.decode(row["input_ids"])
    assert text.startswith(generation_sees)
    trained = tokenizer.decode([t for t, m in zip(row["input_ids"], row["completion_mask"]) if m])
    assert trained == '{"tool": "calculator", "args": {"expression": "2+3"}}<|im_end|>{"final": "5"}<|im_end|>'
    assert "<|im_start|>tool\n5<|im_end|>" in text  # the tool's result is read, not trained on


def test_a_template_without_generation_marks_is_refused(tokenizer):
    tokenizer.chat_template = ("{% for message in messages %}{{ message['role'] + ': ' + message['content'] + "
                               "'\\n' }}{% endfor %}")
    rows = datasets.Dataset.from_list([{"prompt": PROMPT, TRAJECTORY: json.dumps(EPISODE[2:])}])
    with pytest.raises(AOCalibError, match="generation"):
        tokenize_pairs(rows, tokenizer, {}, 512)
