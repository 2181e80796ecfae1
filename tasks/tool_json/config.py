"""``task=tool_json`` settings (``cfg.task``); every default, its help and its allowed values are stated here."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

from ao_calib.calibration import StatedConfidenceTaskConfig
from ao_calib.core.settings import Checked, at_least, one_of, setting, within

from .quoting import QUOTE_STYLES


@dataclass
class ToolJsonGeneratedDataConfig(Checked):
    """The offline generator used when no data files are given (ao_calib_tasks.tool_json.generate)."""

    n: int = setting(2000, "Rows in all, before the held-out split.", allowed=at_least(2))
    seed: Optional[int] = setting(None, "The generator's seed; null: trainer.seed, so that trainer.seed=N alone "
                                  "draws other data and splits.")
    test_fraction: float = setting(0.1, "Share of the rows held out as the test split.",
                                   allowed=within(0, 1, low_open=True, high_open=True))
    validation_fraction: float = setting(
        0.0, "Share of the rows drawn out of the training rows as a validation split, for choosing settings "
        "(data.eval_split=validation scores it); the test split is the same rows whatever this is. 0: none.",
        allowed=within(0, 0.5, high_open=True))
    code_quotes: str = setting(
        "repr", "How the python rows' code writes its string literals: repr (as Python's repr: mostly single "
        "quotes), single or double (every literal alike). Only the quoting changes: the same prompts, splits and "
        "values (ao_calib_tasks.tool_json.quoting).", allowed=one_of(*QUOTE_STYLES))


@dataclass
class ToolJsonDataConfig(Checked):
    """Where the rows come from."""

    train_path: Optional[str] = setting(None, "Training rows, one tool call each, as a JSON array or JSONL (the row "
                                        "format: ao_calib_tasks.tool_json.data); null: generated data.")
    test_path: Optional[str] = setting(None, "Held-out rows in the same schema; null: generated data.")
    generate: ToolJsonGeneratedDataConfig = setting(factory=ToolJsonGeneratedDataConfig,
                                                    help="The offline generator.")
    eval_split: str = setting(
        "test", "The held-out split every evaluation scores: test for reported numbers, validation (generated data "
        "with generate.validation_fraction > 0) while choosing settings, so that the test split is scored once.",
        allowed=one_of("test", "validation"))


@dataclass
class ToolJsonTaskConfig(StatedConfidenceTaskConfig):
    """Also ``calibration`` and ``confidence_instruction``, used when the reward mix trains a stated confidence."""

    data: ToolJsonDataConfig = setting(factory=ToolJsonDataConfig, help="Where the rows come from.")
    episode: str = setting("single_turn", "single_turn: the first message is scored as written (a call is judged, "
                           "never run). multi_turn: calls run in rollouts and evaluations and the model answers after "
                           "reading the results (trainer=grpo, reward=tool_json_episode; docs/concepts/tools.md).",
                           allowed=one_of("single_turn", "multi_turn"))
    max_tool_calls: int = setting(
        3, "Rounds of tool calls a multi-turn episode may make, in GRPO's rollouts (TRL's max_tool_calling_iterations) "
        "and in evaluations; a call after the last round is left unanswered. One is needed per tool row.",
        allowed=at_least(1))

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.data.eval_split == "validation" and (self.data.train_path or self.data.test_path
                                                      or not self.data.generate.validation_fraction):
            raise ValueError("data.eval_split=validation: the validation split is drawn by the generator: leave "
                             "data.train_path and data.test_path null and set data.generate.validation_fraction > 0")
