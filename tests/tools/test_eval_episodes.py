"""Evaluation's greedy episodes (``ao_calib.tools.episodes.play``) with a scripted model: a call is parsed by the
tokenizer's response parser and run, its result is in the next turn's prompt, the episode ends at an answer or at
the task's bound, and an unknown tool, wrong arguments or an unparseable message are results, never errors."""

from __future__ import annotations

import pytest

from ao_calib.config.compose import compose_run_config, typed
from ao_calib.models import loading as models
from ao_calib.models.config import ModelConfig
from ao_calib.tools import Tools, chat_format
from ao_calib.tools.episodes import final_text, play

CALL = '{"tool": "calculator", "args": {"expression": "2+3"}}'


def calculator(expression: str) -> str:
    """Adds.

    Args:
        expression: Terms joined by +.
    """
    return str(sum(int(t) for t in expression.split("+")))


@pytest.fixture(scope="module")
def tokenizer():
    settings = typed(compose_run_config(["model=tiny_qwen3"]).model, ModelConfig)
    tok = models.load_tokenizer(models.model_source(settings, compose_run_config([]).paths.cache_dir), settings)
    chat_format.install(tok, chat_format.JSON_TOOL_CALL, "test")
    return tok


def scripted(*turns: str):
    """A model that writes ``turns`` in order, whatever it is asked; the prompts it saw are kept."""
    seen = []

    def generate_turn(rows):
        seen.extend(rows)
        return [turns[min((len(r["prompt"]) - 1) // 2, len(turns) - 1)] for r in rows]  # a call and its result

    return generate_turn, seen


ROW = {"prompt": [{"role": "user", "content": "What is 2+3?"}]}


def test_a_call_runs_and_its_result_is_the_next_prompt(tokenizer):
    generate, seen = scripted(CALL, '{"final": "5"}')
    [episode] = play(generate, [ROW], Tools((calculator,), 3), tokenizer, {})
    assert [m["role"] for m in episode] == ["assistant", "tool", "assistant"]
    assert episode[0]["tool_calls"][0]["function"] == {"name": "calculator", "arguments": {"expression": "2+3"}}
    assert episode[1]["content"] == "5" and final_text(episode) == '{"final": "5"}'
    prompt = tokenizer.apply_chat_template(seen[1]["prompt"], tokenize=False, add_generation_prompt=True)
    assert prompt.endswith(CALL + "<|im_end|>\n<|im_start|>tool\n5<|im_end|>\n<|im_start|>assistant\n")


def test_the_episode_stops_at_the_bound(tokenizer):
    generate, seen = scripted(CALL)
    [episode] = play(generate, [ROW], Tools((calculator,), 2), tokenizer, {})
    assert [m["role"] for m in episode] == ["assistant", "tool", "assistant", "tool", "assistant"]
    assert len(seen) == 3 and "tool_calls" in episode[-1]  # the third call is left unanswered


@pytest.mark.parametrize(("turn", "result"), [
    ('{"tool": "search", "args": {"q": "x"}}', "{'error': 'Tool search not found.'}"),
    ('{"tool": "calculator", "args": {"formula": "1"}}', "{'error': \""),
])
def test_a_bad_call_gets_an_error_result(tokenizer, turn, result):
    generate, _ = scripted(turn, '{"final": "?"}')
    [episode] = play(generate, [ROW], Tools((calculator,), 3), tokenizer, {})
    assert episode[1]["role"] == "tool" and episode[1]["content"].startswith(result)


def test_a_message_without_a_call_ends_the_episode_as_written(tokenizer):
    for text in ('{"final": "5"}', "five", '{"tool": "calculator", "args": {'):
        generate, _ = scripted(text)
        [episode] = play(generate, [ROW], Tools((calculator,), 3), tokenizer, {})
        assert episode == [{"role": "assistant", "content": text}]


def test_silenced_tools_keep_their_names_and_schemas_and_return_nothing(tokenizer):
    from transformers.utils import get_json_schema

    tools = Tools((calculator,), 3)
    silent = tools.silenced()
    assert get_json_schema(silent.functions[0]) == get_json_schema(calculator)
    generate, _ = scripted(CALL, '{"final": "5"}')
    [episode] = play(generate, [ROW], silent, tokenizer, {})
    assert episode[1] == {"role": "tool", "name": "calculator", "content": ""}


def test_later_user_turns_are_fed_one_at_a_time(tokenizer):
    def generate(rows):  # a call after each user turn, then an answer after its result
        last = rows[0]["prompt"][-1]
        return [CALL if last["role"] == "user" else '{"final": "' + last["content"] + '"}' for _ in rows]

    row = {**ROW, "later_turns": [[{"role": "user", "content": "And again?"}]]}
    [episode] = play(generate, [row], Tools((calculator,), 1), tokenizer, {})
    roles = [m["role"] for m in episode]
    assert roles == ["assistant", "tool", "assistant", "user", "assistant", "tool", "assistant"]
    assert episode[3]["content"] == "And again?" and episode[-1]["content"] == '{"final": "5"}'


def test_each_row_can_have_its_own_tools_and_parser(tokenizer):
    def doubled(expression: str) -> str:
        """Doubles.

        Args:
            expression: A number.
        """
        return str(2 * int(expression))

    doubled.__name__ = "calculator"
    rows = [ROW, {**ROW, "double": True}]
    seen = []

    def parse(tok, prompt_text, text):
        seen.append(text)
        return {"role": "assistant", "content": text, **({"tool_calls": [
            {"type": "function", "function": {"name": "calculator", "arguments": {"expression": "4"}}}]}
            if text == "call" else {})}

    def generate(asked):
        return ["call" if a["prompt"][-1]["role"] == "user" else "done" for a in asked]

    episodes = play(generate, rows, lambda row: Tools((doubled if row.get("double") else calculator,), 1),
                    tokenizer, {}, parse=parse)
    assert [e[1]["content"] for e in episodes] == ["4", "8"] and seen.count("call") == 2
