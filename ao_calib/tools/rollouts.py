"""GRPO's episodes where TRL's tool loop cannot carry them: rows with later user turns (BFCL's multi-turn cases) and
tools of their own (a case's API instances). This is TRL's ``rollout_func``, and its loop is evaluation's
(``episodes.play``): each turn is sampled by the trainer's own single-turn generator (TRL's, or the project's fast
path) from the ids so far; the tool results and the next user turn are appended as the chat template renders them
after a message, their tokens out of the loss (``env_mask``). The ids trained on are the ids sampled, never
re-tokenised, and an episode ends when its completion budget (``max_completion_length``) is spent."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from ao_calib.core.chat import chat_prompt_text
from ao_calib.tools import Tools
from ao_calib.tools.episodes import play

INDEX = "_rollout_index"  # which rollout a row of a turn's batch is, as the episode loop hands it back


class RolloutRowsMixin:
    """For a GRPO trainer with an ``EpisodeRollout``: keeps the rows of the batch being generated (TRL hands
    ``rollout_func`` their prompts alone; an episode needs its row's tools and later turns)."""

    rollout_rows: list[dict] = ()  # type: ignore[assignment]  # set before each generation batch

    def _generate_and_score_completions(self, inputs):
        self.rollout_rows = list(inputs)
        return super()._generate_and_score_completions(inputs)


def suffix_ids(tokenizer, messages: list[dict], chat_template_kwargs: dict) -> list[int]:
    """The ids the chat template writes after an assistant message's end-of-turn token for ``messages`` (tool
    results, a user turn), through the next assistant turn's start: TRL's ``_get_tool_suffix_ids`` for any role."""
    dummy = [{"role": "user", "content": "dummy"}, {"role": "assistant", "content": "dummy"}]

    def render(conversation: list[dict], generation_prompt: bool) -> list[int]:
        return list(tokenizer.apply_chat_template(conversation, tokenize=True, add_generation_prompt=generation_prompt,
                                                  return_dict=False, **chat_template_kwargs))

    prefix, full = render(dummy, False), render(dummy + messages, True)
    ends = [i for i, token in enumerate(prefix) if token == tokenizer.eos_token_id]
    prefix = prefix[: ends[-1] + 1] if ends else prefix  # the sampled message ends at its EOS, not after a newline
    if full[: len(prefix)] != prefix:
        raise ValueError("the chat template renders a conversation's start differently once messages follow it")
    return full[len(prefix):]


@dataclass
class _Rollout:
    prompt: list[int]
    completion: list[int] = field(default_factory=list)
    mask: list[int] = field(default_factory=list)  # 1: sampled (trained on), 0: tool results and user turns
    logprobs: list[float] = field(default_factory=list)
    seen: int = 0  # the conversation's messages already in the ids
    ended: bool = False  # its completion budget is spent: later turns get no ids and no samples


@dataclass(frozen=True)
class EpisodeRollout:
    """TRL's ``rollout_func(prompts, trainer)``: one episode per row of the batch (TRL has already repeated each
    prompt for its group), each with the tools ``row_tools(row)`` gives it."""

    row_tools: Callable[[dict], Tools]

    def __call__(self, prompts: list, trainer) -> dict:
        rows = trainer.rollout_rows
        if len(rows) != len(prompts):
            raise ValueError(f"rollout_func: {len(prompts)} prompts for {len(rows)} rows; the trainer must keep the "
                             "batch's rows (RolloutRowsMixin)")
        tokenizer, template = trainer.processing_class, dict(trainer.chat_template_kwargs or {})
        budget = trainer.max_completion_length
        rollouts = [_Rollout(tokenizer.encode(chat_prompt_text(tokenizer, prompt, template), add_special_tokens=False),
                             seen=len(prompt)) for prompt in prompts]
        with_logprobs = True  # the generator gives each sampled token's log-probability (vLLM), or never

        def generate_turn(asked: list[dict]) -> list[str]:
            nonlocal with_logprobs
            live = []  # the asked rollouts whose budget is not spent, by index
            for row in asked:
                rollout = rollouts[row[INDEX]]
                added = row["prompt"][rollout.seen:]  # the tool results or user turn since its last message
                if added and not rollout.ended:
                    ids = suffix_ids(tokenizer, added, template)
                    if len(rollout.completion) + len(ids) >= budget:
                        rollout.ended = True
                    else:
                        rollout.completion += ids
                        rollout.mask += [0] * len(ids)
                        rollout.logprobs += [0.0] * len(ids)
                rollout.seen = len(row["prompt"]) + 1  # and the message this turn samples
                if not rollout.ended:
                    live.append(row[INDEX])
            texts = {}
            if live:
                ids, logprobs = trainer._generate_single_turn(
                    [rollouts[i].prompt + rollouts[i].completion for i in live], None, {}, 1)
                with_logprobs = with_logprobs and logprobs is not None
                for n, (i, turn) in enumerate(zip(live, ids, strict=True)):
                    rollout = rollouts[i]
                    room = budget - len(rollout.completion)
                    turn = list(turn)[:room]
                    rollout.ended = len(turn) >= room
                    rollout.completion += turn
                    rollout.mask += [1] * len(turn)
                    rollout.logprobs += list(logprobs[n])[: len(turn)] if logprobs is not None else []
                    texts[i] = tokenizer.decode(turn, skip_special_tokens=True)
            return [texts.get(row[INDEX], "") for row in asked]  # a spent budget answers nothing

        indexed = [{**row, "prompt": prompt, INDEX: i} for i, (row, prompt) in enumerate(zip(rows, prompts))]
        episodes = play(generate_turn, indexed, self.row_tools, tokenizer, template)
        return {"prompt_ids": [r.prompt for r in rollouts], "completion_ids": [r.completion for r in rollouts],
                "logprobs": [r.logprobs for r in rollouts] if with_logprobs else None,
                "env_mask": [r.mask for r in rollouts], "episode": episodes}
