"""The tool-call chat format (``ao_calib.tools.chat_format``) against TRL's own checks and parser, on a ChatML
tokenizer: TRL accepts the template for tool calling without replacing it, the model's JSON call parses into
``tool_calls`` (a final answer, a truncated call or prose stay content), a tool result renders as TRL's loop appends
it, messages without calls render as the plain template does, and an SFT warm-up's assistant mask covers the
model's turns only."""

from __future__ import annotations

import pytest

from ao_calib.config.compose import compose_run_config, typed
from ao_calib.core.errors import AOCalibError
from ao_calib.models import loading as models
from ao_calib.models.config import ModelConfig
from ao_calib.tools import chat_format
from ao_calib.tools.chat_format import JSON_TOOL_CALL

PLAIN = ("{% for message in messages %}{{'<|im_start|>' + message['role'] + '\n' + message['content'] + "
         "'<|im_end|>' + '\n'}}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}")
CALL = {"type": "function", "function": {"name": "calculator", "arguments": {"expression": "2*(3+4)"}}}
QUESTION = [{"role": "system", "content": "Answer in JSON."}, {"role": "user", "content": "What is 2*(3+4)?"}]


def calculator(expression: str) -> str:
    """Evaluates arithmetic.

    Args:
        expression: The expression.
    """
    return "14"


@pytest.fixture(scope="module")
def tokenizer():
    settings = typed(compose_run_config(["model=tiny_qwen3"]).model, ModelConfig)
    tok = models.load_tokenizer(models.model_source(settings, compose_run_config([]).paths.cache_dir), settings)
    chat_format.install(tok, JSON_TOOL_CALL, "task.tools.enabled")
    return tok


def test_trl_accepts_the_template_for_tool_calling_as_it_is(tokenizer):
    from trl.chat_template_utils import is_chat_template_prefix_preserving, supports_tool_calling

    assert supports_tool_calling(tokenizer)
    assert is_chat_template_prefix_preserving(tokenizer)  # so TRL keeps it rather than swapping in its own


def test_messages_without_calls_render_as_the_plain_template(tokenizer):
    answered = [*QUESTION, {"role": "assistant", "content": '{"final": "14"}'}]
    for messages, prompt in ((QUESTION, True), (answered, False)):
        got = tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=prompt)
        plain = tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=prompt,
                                              chat_template=PLAIN)
        assert got == plain


@pytest.mark.parametrize(("text", "calls"), [
    ('{"tool": "calculator", "args": {"expression": "2*(3+4)"}}', [CALL]),
    ('{"tool": "python", "args": {"code": "print({1: 2}[1])"}}',
     [{"type": "function", "function": {"name": "python", "arguments": {"code": "print({1: 2}[1])"}}}]),
    ('{"final": "14"}', None),
    ('{"tool": "calculator", "args": {"expression": "1+1"', None),  # cut off: nothing runs
])
def test_the_models_text_parses_into_tool_calls_or_content(tokenizer, text, calls):
    from trl.chat_template_utils import parse_response

    prompt = tokenizer.apply_chat_template(QUESTION, tokenize=True, add_generation_prompt=True, return_dict=False)
    ids = tokenizer(text + "<|im_end|>", add_special_tokens=False)["input_ids"]
    message = parse_response(tokenizer, ids, prefix=prompt, tools=[calculator])
    assert message.get("tool_calls") == calls
    if calls is None:
        assert message["content"].strip() == text


def test_a_call_and_its_result_render_as_the_model_wrote_and_trl_appends_them(tokenizer):
    episode = [*QUESTION, {"role": "assistant", "content": "", "tool_calls": [CALL]},
               {"role": "tool", "name": "calculator", "content": "14"}]
    text = tokenizer.apply_chat_template(episode, tokenize=False, add_generation_prompt=True)
    assert text.endswith('<|im_start|>assistant\n{"tool": "calculator", "args": {"expression": "2*(3+4)"}}'
                         "<|im_end|>\n<|im_start|>tool\n14<|im_end|>\n<|im_start|>assistant\n")


def test_the_assistant_mask_covers_the_models_turns_only(tokenizer):
    episode = [*QUESTION, {"role": "assistant", "content": "", "tool_calls": [CALL]},
               {"role": "tool", "name": "calculator", "content": "14"},
               {"role": "assistant", "content": '{"final": "14"}'}]
    out = tokenizer.apply_chat_template(episode, tokenize=True, return_dict=True, return_assistant_tokens_mask=True)
    trained = tokenizer.decode([t for t, m in zip(out["input_ids"], out["assistant_masks"]) if m])
    assert trained == '{"tool": "calculator", "args": {"expression": "2*(3+4)"}}<|im_end|>{"final": "14"}<|im_end|>'


def test_an_older_transformers_is_refused_naming_the_key(monkeypatch):
    import transformers

    monkeypatch.setattr(transformers, "__version__", "5.10.4")
    with pytest.raises(AOCalibError, match=r"task.tools.enabled: .*transformers >= 5.13.0.*5.10.4"):
        chat_format.check_transformers("task.tools.enabled")
