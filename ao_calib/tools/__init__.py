"""Tools a model calls during an episode: what a task hands the run (``Tools``), the Python sandbox (``sandbox``),
how a call looks in the conversation TRL's tool loop reads (``chat_format``) and evaluation's greedy episodes
(``episodes``)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

# The column of a row whose SFT target is a whole episode after its prompt (the model's calls, the tools' results, its
# answer), as JSON text of the messages: Arrow would merge the calls' differing argument dicts into one struct. Its
# assistant turns are trained on, its tool turns are not (ao_calib.trainers.sft).
TRAJECTORY = "completion_messages"
LATER_TURNS = "later_turns"  # a row's user turns after its prompt's, each a list of messages, fed one at a time


@dataclass(frozen=True)
class Tools:
    """A task's tools for multi-turn episodes, in GRPO's rollouts (TRL's tool loop) and in evaluations alike."""

    functions: tuple  # callables, each a tool named by its __name__ and described by its type hints and docstring
    max_rounds: int  # rounds of calls an episode may make; a call after the last round is left unanswered
    #: how a message's calls are read, ``episodes.parsed_turn``'s signature; None: the tokenizer's response parser
    #: (TRL's loop reads rollouts with it)
    parse: Callable | None = None

    def by_name(self) -> dict:
        return {fn.__name__: fn for fn in self.functions}

    def silenced(self) -> Tools:
        """The same tools (names, schemas, bound) returning nothing: the control an evaluation scores beside the
        real ones, so that what the results teach is told apart from what the calls alone do."""
        import functools

        def silent(fn):
            return functools.wraps(fn)(lambda *args, **kwargs: "")

        return Tools(tuple(silent(fn) for fn in self.functions), self.max_rounds, self.parse)


def episodes_in_training(data) -> str | None:
    """How GRPO rolls out ``data``'s training rows (a ``TaskData``): ``"tools"`` (TRL's tool loop, the same tools for
    every row), ``"rows"`` (each row's own tools and later user turns: ``rollouts.EpisodeRollout``) or None (single
    turns: a task whose held-out rows alone have tools of their own, BFCL multi-turn scored beside single-turn
    training)."""
    if data.tools is not None:
        return "tools"
    if data.row_tools is not None and LATER_TURNS in (getattr(data.train, "column_names", None) or ()):
        return "rows"
    return None


def stage_clashes(stage) -> list[str]:
    """What in an RL stage's settings (``cfg.trainer``) cannot run a task's tools: TRL's tool loop is GRPO's, and the
    project's greedy group member and shared-prefix pass do not see the later turns."""
    found = []
    if getattr(stage, "name", None) not in ("grpo", "sft"):
        found.append(f"trainer={stage.name} (single-turn completions; use trainer=grpo)")
    if getattr(stage, "greedy_member", False):
        found.append("trainer.greedy_member=true (each later turn would count as its own group)")
    if getattr(stage, "shared_prefix", False):
        found.append("trainer.shared_prefix=true")
    return found
