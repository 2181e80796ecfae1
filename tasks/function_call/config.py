"""``task=function_call`` settings (``cfg.task``); every default, its help and its allowed values are stated here."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Optional

from ao_calib.calibration import StatedConfidenceTaskConfig
from ao_calib.core.settings import Checked, at_least, one_of, setting, within

from .bfcl import DOCS_STYLES, data_format


@dataclass
class GeneratedDataConfig(Checked):
    """The offline generator used when no data files are given (ao_calib_tasks.function_call.generate)."""

    n_train: int = setting(512, "Generated training rows.", allowed=at_least(1))
    n_test: int = setting(64, "Generated held-out rows.", allowed=at_least(1))
    seed: Optional[int] = setting(None, "The generator's seed; null: trainer.seed, so that trainer.seed=N alone "
                                  "draws other data and splits.")
    bfcl_distractors: int = setting(
        1, "data.format=bfcl: docs of functions the answer does not call, shown beside the needed ones (BFCL's "
        "Python categories show 1-4 docs in all, and each doc costs prompt tokens at every step). 0: BFCL's simple "
        "and parallel categories instead of multiple and parallel_multiple for one-function answers.",
        allowed=at_least(0))
    bfcl_irrelevance: float = setting(
        0.0, "data.format=bfcl: the share of cases in BFCL's irrelevance category: a query shown only functions that "
        "cannot answer it, where the right answer is no call (`[]` or a sentence saying so). 0: none.",
        allowed=within(0, 1, high_open=True))
    bfcl_synthetic: float = setting(
        0.0, "data.format=bfcl: the share of generated training cases whose functions are made up from word lists "
        "(ao_calib_tasks.function_call.synthetic) instead of taken from the 26 hand-written ones, so the warm-up "
        "teaches reading a doc, not memorising a library. Held-out cases keep the hand-written ones.",
        allowed=within(0, 1))
    bfcl_near_miss: float = setting(
        0.0, "data.format=bfcl: the share of generated training irrelevance cases whose function doc is a near miss "
        "(the same verb as the function the query needs, or a parameter of the same name), as most of BFCL's are, "
        "instead of any unneeded function. Held-out cases keep the random one. 0: none.",
        allowed=within(0, 1))
    bfcl_parallel_each: float = setting(
        0.0, "data.format=bfcl, with bfcl_synthetic > 0: the share of made-up functions' parallel queries (one "
        "function called 2-4 times) that give every call its own arguments, as BFCL's parallel queries do, instead "
        "of varying one argument. Training cases only. 0: none.",
        allowed=within(0, 1))
    bfcl_context: float = setting(
        0.0, "data.format=bfcl: the share of generated training cases whose query is set in one or two sentences of "
        "context that change nothing in the answer, as BFCL's longer queries are, so that a long request is not new "
        "to the model. Training cases only. 0: none.", allowed=within(0, 1))
    bfcl_parallel_story: float = setting(
        0.0, "data.format=bfcl, with bfcl_synthetic > 0: the share of the parallel queries bfcl_parallel_each leaves "
        "that are told one sentence per call, as BFCL's longer parallel queries are, every call with its own "
        "arguments. Training cases only. 0: none.", allowed=within(0, 1))

    def __post_init__(self) -> None:
        super().__post_init__()
        for key in ("bfcl_parallel_each", "bfcl_parallel_story"):
            if getattr(self, key) and not self.bfcl_synthetic:
                raise ValueError(f"data.generate.{key} applies to made-up functions only: set "
                                 f"task.data.generate.bfcl_synthetic > 0 as well, or leave {key} at 0")
        if self.bfcl_near_miss and not self.bfcl_irrelevance:
            raise ValueError("data.generate.bfcl_near_miss changes irrelevance cases only: set "
                             "task.data.generate.bfcl_irrelevance > 0 as well, or leave bfcl_near_miss at 0")


@dataclass
class FunctionCallDataConfig(Checked):
    """Where the rows come from."""

    format: str = setting("rows", "rows: JSONL prompt and answer rows. bfcl: BFCL question files or bfcl_eval/data "
                          "folders (such a folder is always read as bfcl); no paths: generated cases in BFCL's format. "
                          "multi_turn: generated multi-turn cases over BFCL's classes (docs/concepts/"
                          "function_calling.md).",
                          allowed=one_of("rows", "bfcl", "multi_turn"))
    train_path: Optional[str] = setting(None, "Training rows; null: generated data.")
    test_path: Optional[str] = setting(None, "Held-out rows; a test_path alone replaces only the generated held-out "
                                       "split.")
    extra_test_path: Optional[str] = setting(
        None, "A second held-out set scored with every evaluation, never trained on: BFCL question files or a "
        "BFCL-layout folder (data.format=bfcl; multi-turn files for multi_turn), or rows (data.format=rows). Scores "
        "go into eval_<tag>.json under \"extra_test\", rows into eval_predictions_<tag>_extra.jsonl.")
    extra_validation_path: Optional[str] = setting(
        None, "What data.eval_split=validation scores in place of extra_test_path, in the same format: a held-out "
        "set drawn apart from it (e.g. data/bfcl_v4_real_validation), so settings are chosen on real cases "
        "without scoring the test set. Never trained on. null: no extra set.")
    bfcl_docs: str = setting(
        "indented", "data.format=bfcl or multi_turn: how the function docs are written into the system turn, in "
        "training and evaluation alike: JSON indented or compact (one line), or signatures (a line a function: "
        "about a tenth of the tokens). Evaluate a model in the style it was trained on.",
        allowed=one_of(*DOCS_STYLES))
    extra_test_samples: Optional[int] = setting(None, "Rows of the extra held-out set scored; null: all of it, else "
                                                "a sample drawn with eval.seed.", allowed=at_least(1))
    generate: GeneratedDataConfig = setting(factory=GeneratedDataConfig, help="The offline generator.")
    eval_split: str = setting(
        "test", "The held-out split every evaluation scores: test (for reported numbers) or validation "
        "(data.format=bfcl or multi_turn, generated cases: a third split drawn apart from train and test, for "
        "choosing settings; "
        "it scores extra_validation_path in place of extra_test_path).",
        allowed=one_of("test", "validation"))
    max_train_samples: Optional[int] = setting(None, "At most this many training rows; null: all.",
                                               allowed=at_least(1))

    def __post_init__(self) -> None:
        super().__post_init__()
        self.format = data_format(self.format, {"test_path": self.test_path, "train_path": self.train_path,
                                                "extra_test_path": self.extra_test_path,
                                                "extra_validation_path": self.extra_validation_path})
        if self.format == "multi_turn":
            from .bfcl_multi_turn import multi_turn_files

            for key in ("extra_test_path", "extra_validation_path"):
                path = getattr(self, key)
                if path and Path(path).exists() and not multi_turn_files(path):
                    raise ValueError(f"data.{key}={path} holds no BFCL multi-turn question file, and a multi-turn "
                                     "run plays its extra set as episodes: name a BFCL_v4_multi_turn_*.json file "
                                     "or a folder of them")


@dataclass
class FunctionCallTaskConfig(StatedConfidenceTaskConfig):
    """Also ``calibration`` and ``confidence_instruction``, used when the reward mix trains a stated confidence."""

    data: FunctionCallDataConfig = setting(factory=FunctionCallDataConfig, help="Where the rows come from.")

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.data.eval_split == "validation" and (self.data.format not in ("bfcl", "multi_turn")
                                                     or self.data.test_path):
            raise ValueError("data.eval_split=validation: the validation split is drawn by the generator in BFCL's "
                             "format: set data.format=bfcl (or multi_turn) and leave data.test_path null")
        if self.min_no_call_probability is not None and self.data.format != "bfcl":
            raise ValueError("min_no_call_probability decides between BFCL's empty answer and a call: set "
                             "data.format=bfcl, or leave min_no_call_probability null")
    min_no_call_probability: Optional[float] = setting(
        None, "Evaluation (greedy decoding), data.format=bfcl: answer with no call (nothing or `[]`) only where the "
        "model's own probability of that answer is at least this, else with its best non-empty answer. Training is "
        "unchanged; choose it on the validation split (experiments/bfcl_no_call.py). null: greedy.",
        allowed=within(0, 1, low_open=True))
    max_steps_per_turn: int = setting(
        20, "Multi-turn episodes: messages with calls the model may write in one user turn before the turn is cut "
        "(BFCL force-terminates at 20). Lower bounds a CPU run's time; a turn that needs more fails.",
        allowed=at_least(1))
    strict_format: bool = setting(True, "BFCL scoring: true rejects prose or a fenced block around the call, as "
                                  "BFCL's decoder does; false takes the first call list found in a fenced block or "
                                  "on a line of its own.")
