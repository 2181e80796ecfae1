"""How a tool call looks in the conversation, for TRL's own tool loop (``GRPOTrainer(tools=...)``): a ChatML chat
template that renders an assistant message's ``tool_calls`` in the task's call syntax (and marks assistant turns
with ``{% generation %}``, so an SFT warm-up on whole trajectories trains on the model's turns only), and the
``response_template`` transformers parses the model's text back into ``tool_calls`` with. TRL then runs the calls,
appends the results as ``tool`` messages (their tokens out of the loss) and continues from the sampled ids without
re-tokenising them."""

from __future__ import annotations

from dataclasses import dataclass

from ao_calib.core.errors import AOCalibError

# tokenizer.response_template (the parser TRL's parse_response reads) arrived in transformers 5.13
MIN_TRANSFORMERS = "5.13.0"


@dataclass(frozen=True)
class CallSyntax:
    """One tool call as the model writes it: ``render``, a Jinja expression of ``call`` (TRL's
    ``{"type": "function", "function": {"name", "arguments"}}``) for the template; ``open_pattern`` (with a
    ``name`` group, up to where the JSON arguments start) and ``close_pattern`` (after them) for the parser."""

    render: str
    open_pattern: str
    close_pattern: str


# tool_json: {"tool": "calculator", "args": {"expression": "2*(3+4)"}}
JSON_TOOL_CALL = CallSyntax(
    render="{'tool': call['function']['name'], 'args': call['function']['arguments']} | tojson",
    open_pattern=r'\{\s*"tool"\s*:\s*"(?P<name>[^"\\]*)"\s*,\s*"args"\s*:',
    close_pattern=r"\}\s*(?=<\|im_end\|>|$)",
)


def chatml_template(syntax: CallSyntax) -> str:
    """ChatML without a default system prompt (SmolLM2's and Qwen's turn markers); a message without tool calls
    renders byte for byte as the plain template does."""
    return ("{% for message in messages %}{{ '<|im_start|>' + message['role'] + '\n' }}"
            "{% if message['role'] == 'assistant' %}{% generation %}"
            "{% if message.get('tool_calls') and not message['content'] %}"
            "{% for call in message['tool_calls'] %}{{ " + syntax.render + " }}{% endfor %}"
            "{% else %}{{ message['content'] }}{% endif %}{{ '<|im_end|>' }}{% endgeneration %}{{ '\n' }}"
            "{% else %}{{ message['content'] + '<|im_end|>' + '\n' }}{% endif %}{% endfor %}"
            "{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}")


def response_template(syntax: CallSyntax) -> dict:
    """transformers' ``response_template``: a call in ``syntax`` becomes ``tool_calls`` (several calls, a list),
    anything else ``content``."""
    return {
        "defaults": {"role": "assistant"},
        "start_anchor": "<|im_start|>assistant\n",
        "fields": {
            "tool_calls": {"open_pattern": syntax.open_pattern, "close_pattern": syntax.close_pattern,
                           "content": "json", "repeats": True,
                           "transform": {"type": "function", "function": {"name": "{name}", "arguments": "{content}"}}},
            "content": {"close_pattern": r"<\|im_end\|>\s*", "content": "text"},
        },
    }


def check_transformers(setting: str) -> None:
    """Refuses tool episodes on a transformers without ``response_template``, naming the key that asked for them."""
    import transformers
    from packaging.version import Version

    if Version(transformers.__version__) < Version(MIN_TRANSFORMERS):
        raise AOCalibError(f"{setting}: tool calls inside rollouts need transformers >= {MIN_TRANSFORMERS} (its "
                           f"response_template parses them); this environment has {transformers.__version__}: "
                           f"pip install 'transformers>={MIN_TRANSFORMERS}'")


def install(tokenizer, syntax: CallSyntax, setting: str) -> None:
    """Gives ``tokenizer`` the template and parser of ``syntax`` (ChatML tokenizers only)."""
    check_transformers(setting)
    install_template(tokenizer, syntax, setting)
    tokenizer.response_template = response_template(syntax)


def install_template(tokenizer, syntax: CallSyntax, setting: str) -> None:
    """Gives ``tokenizer`` the ChatML template alone, for episodes whose calls are read by a parser of the task's
    own (``Tools.parse``) and whose messages carry the model's text as written."""
    if "<|im_end|>" not in tokenizer.get_vocab():
        raise AOCalibError(f"{setting}: tool episodes use a ChatML template (<|im_start|> ... <|im_end|>), and this "
                           "model's tokenizer has no <|im_end|> token")
    tokenizer.chat_template = chatml_template(syntax)
