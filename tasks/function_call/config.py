"""``task=function_call`` settings (``cfg.task``); every default is stated here."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Optional

from ao_calib.calibration import StatedConfidenceTaskConfig


@dataclass
class GeneratedDataConfig:
    """The offline generator used when no data files are given (ao_calib_tasks.function_call.generate)."""

    n_train: int = 512
    n_test: int = 64
    seed: int = 0
    # data.format=bfcl: docs of functions the answer does not call, shown beside the needed ones (BFCL's Python
    # categories show 1-4 docs in all, and each doc costs prompt tokens at every step). 0: BFCL's simple and
    # parallel categories instead of multiple and parallel_multiple for one-function answers.
    bfcl_distractors: int = 1
    # data.format=bfcl: the share of cases in BFCL's irrelevance category: a query shown only functions that
    # cannot answer it, where the right answer is no call (`[]` or a sentence saying so). 0: none.
    bfcl_irrelevance: float = 0.0


@dataclass
class FunctionCallDataConfig:
    # rows: JSONL rows of prompt and answer (the function-calling design notes' format).
    # bfcl: BFCL question files (or a folder laid out as BFCL's bfcl_eval/data) with their possible_answer files;
    # without paths, the generator's cases in BFCL's format.
    format: str = "rows"
    # null -> generated data; a test_path alone replaces only the generated held-out split
    train_path: Optional[str] = None
    test_path: Optional[str] = None
    # A second held-out set scored with every evaluation (initial, after the warm-up, final): BFCL question files
    # or a folder in BFCL's layout (data.format=bfcl), or rows (data.format=rows). Never trained on. Its scores go
    # into eval_<tag>.json under "extra_test" and its rows into eval_predictions_<tag>_extra.jsonl.
    extra_test_path: Optional[str] = None
    extra_test_samples: Optional[int] = None  # null: all of it; else a sample drawn with eval.seed
    generate: GeneratedDataConfig = field(default_factory=GeneratedDataConfig)
    max_train_samples: Optional[int] = None


@dataclass
class FunctionCallTaskConfig(StatedConfidenceTaskConfig):
    """Also ``calibration`` and ``confidence_instruction``, used when the reward mix trains a stated confidence."""

    data: FunctionCallDataConfig = field(default_factory=FunctionCallDataConfig)
    # BFCL scoring: true rejects prose or a fenced block around the call, as BFCL's decoder does;
    # false takes the first call list found in a fenced block or on a line of its own.
    strict_format: bool = True

    def __post_init__(self):
        if self.data.format not in ("rows", "bfcl"):
            raise ValueError(f"data.format: {self.data.format!r} is not one of rows, bfcl")
        if self.data.generate.bfcl_distractors < 0:
            raise ValueError(f"data.generate.bfcl_distractors: {self.data.generate.bfcl_distractors} is below 0")
        if self.data.extra_test_samples is not None and self.data.extra_test_samples < 1:
            raise ValueError(f"data.extra_test_samples: {self.data.extra_test_samples} is below 1")
        if not 0.0 <= self.data.generate.bfcl_irrelevance < 1.0:
            raise ValueError(f"data.generate.bfcl_irrelevance: {self.data.generate.bfcl_irrelevance} is not in "
                             "[0, 1)")
