"""GRPO's episodes over several user turns, each row with tools of its own (``ao_calib.tools.rollouts``, TRL's
``rollout_func`` as the project's GRPO builder wires it for ``TaskData.row_tools``): a scripted model (the tiny Qwen3
with LoRA, whose sampling follows a script; the loss pass is the real model's) calls a row's tool, the result and the
next user turn are in the following turns' inputs, every rollout has its own instance, the reward reads the played
episode, the tool results' and user turns' tokens carry no loss, the ids trained on are the ids sampled, and the
completion budget ends an episode."""

from __future__ import annotations

import dataclasses

import pytest
from datasets import Dataset

from ao_calib.core.errors import AOCalibError
from ao_calib.rewards import RewardPhase, RewardSchedule
from ao_calib.task_api import TaskData
from ao_calib.tools import Tools
from ao_calib.tools.episodes import LATER_TURNS
from ao_calib.trainers import build_trainer
from ao_calib.trainers.config import RLOOTrainerConfig
from tests.helpers.scripted_rollouts import (
    Script,
    calculator_setup,
    completion_rows,
    run_one_step,
    stage,
)

CALL = '{"tool": "add", "args": {"n": 2}}<|im_end|>'
DONE = "done<|im_end|>"
EPISODES: list = []


def counter(row: dict) -> Tools:
    """A fresh counter for each rollout: ``add`` returns the running total."""
    total = [0]

    def add(n: int) -> str:
        total[0] += n
        return str(total[0])

    return Tools((add,), 3)


def turns_done(completions, episode, **kwargs) -> list[float]:
    EPISODES.extend(episode)
    return [float(sum(m["role"] == "assistant" and m["content"] == "done" for m in e)) for e in episode]


class TurnScript(Script):
    """A call after each user turn, ``done`` (no call) after the tool's result."""

    def reply(self, prompt_text: str) -> str:
        last = prompt_text.rsplit("<|im_start|>", 2)[-2]
        return DONE if last.startswith("tool\n") else CALL


@pytest.fixture
def turns(tmp_path):
    rows = Dataset.from_list([{"prompt": [{"role": "user", "content": f"first ({i})"}],
                               LATER_TURNS: [[{"role": "user", "content": f"second ({i})"}]]} for i in range(2)])
    schedule = RewardSchedule(("turns_done",), (RewardPhase(None, (1.0,)),))
    data = TaskData(rows, rows, row_tools=counter)
    return dataclasses.replace(calculator_setup(tmp_path), data=data, schedule=schedule,
                               reward_fns={"turns_done": turns_done})


def ids(tokenizer, text: str) -> list[int]:
    return tokenizer(text, add_special_tokens=False)["input_ids"]


def test_episodes_feed_results_and_later_turns_and_train_on_the_sampled_ids_alone(turns):
    EPISODES.clear()
    script = TurnScript(turns.tokenizer)
    seen = run_one_step(turns, script, stage(max_completion_length=256))
    tok = turns.tokenizer
    inputs = [tok.decode(prompt) for prompt, _ in script.sampled]
    assert len(inputs) == 4 * 4  # per rollout: two user turns, each a call and a reply after its result
    assert sum(t.endswith("<|im_start|>tool\n2<|im_end|>\n<|im_start|>assistant\n") for t in inputs) == 4
    # each rollout's own counter: its second call returns 4, not another rollout's running total
    assert sum(t.endswith("<|im_start|>tool\n4<|im_end|>\n<|im_start|>assistant\n") for t in inputs) == 4
    assert sum("<|im_start|>user\nsecond (" in t.rsplit("<|im_start|>assistant", 2)[-2] for t in inputs) == 4
    result = [ids(tok, "\n<|im_start|>tool\n" + n + "<|im_end|>\n<|im_start|>assistant\n") for n in ("2", "4")]
    for completion, mask in completion_rows(seen):
        row = tok.decode(completion).split("second (")[1][0]  # the sampler's order is its own
        user = ids(tok, f"\n<|im_start|>user\nsecond ({row})<|im_end|>\n<|im_start|>assistant\n")
        pieces = [(ids(tok, CALL), 1), (result[0], 0), (ids(tok, DONE), 1), (user, 0),
                  (ids(tok, CALL), 1), (result[1], 0), (ids(tok, DONE), 1)]
        assert completion == [t for piece, _ in pieces for t in piece]  # sampled ids, never re-tokenised
        assert mask == [m for piece, m in pieces for _ in piece]
    assert [[m["role"] for m in e] for e in EPISODES] == [["assistant", "tool", "assistant", "user", "assistant",
                                                           "tool", "assistant"]] * 4
    assert [m["content"] for m in EPISODES[0] if m["role"] == "tool"] == ["2", "4"]


def test_the_completion_budget_ends_an_episode(turns):
    EPISODES.clear()
    script = TurnScript(turns.tokenizer)
    budget = 2 * len(ids(turns.tokenizer, CALL)) + 10
    seen = run_one_step(turns, script, stage(max_completion_length=budget))
    for completion, mask in completion_rows(seen):
        assert len(completion) <= budget and "second" not in turns.tokenizer.decode(completion)
    assert all(not any(m.get("content") == "4" for m in e) for e in EPISODES)  # no turn after the budget ran


def test_a_trainer_without_rollouts_is_refused(turns):
    with pytest.raises(AOCalibError, match="trainer=rloo samples single-turn completions"):
        build_trainer(turns, RLOOTrainerConfig(max_steps=1, batch_size=2, num_generations=2), "train")


def test_rows_train_through_episodes_only_when_they_carry_later_turns(turns):
    from ao_calib.tools import episodes_in_training

    single = Dataset.from_list([{"prompt": [{"role": "user", "content": "first"}]}])
    assert episodes_in_training(turns.data) == "rows"
    # held-out rows with tools of their own (BFCL multi-turn scored beside single-turn training): single turns
    assert episodes_in_training(TaskData(single, turns.data.test, row_tools=counter)) is None
    assert episodes_in_training(TaskData(single, single, tools=counter({}))) == "tools"
