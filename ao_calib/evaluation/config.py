"""The held-out evaluation's settings (``eval.*``): what is generated and scored, how the stated confidence is read,
and how each stage's adapter is chosen on the validation split."""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum
from typing import Optional

from ao_calib.core.settings import Checked, at_least, setting


class ConfidenceDecoding(str, Enum):
    """How a greedy evaluation writes the number of a stated confidence (``ao_calib.calibration.decoding``)."""

    most_likely = "most_likely"  # greedy, as every other token
    expected = "expected"  # the task's scale number nearest the mean of the model's distribution over the scale
    mean = "mean"  # that mean itself, rounded to a whole number


class ClosingTable(str, Enum):
    """Which figures the closing block's table shows (``ao_calib.reporting.closing_table``)."""

    headline = "headline"  # accuracy under each condition, AUROC, AUROC within a question, ECE, parse rate
    full = "full"  # every figure of the evaluation


class SelectMode(str, Enum):
    """Which way ``eval.select_metric`` is better (``ao_calib.evaluation.selection``)."""

    auto = "auto"  # min for error-like figures (ece, brier, aurc, loss, ...), max for the others
    max = "max"
    min = "min"


@dataclass
class EvalConfig(Checked):
    """Held-out evaluation: before training, after the warm-up, during training and at the end."""

    enabled: bool = setting(True, "Evaluate on the held-out split at all.")
    initial: bool = setting(True, "Also evaluate before training.")
    after_warmup: bool = setting(True, "Evaluate after the warm-up stage too (eval_warmup.json).")
    every_steps: Optional[int] = setting(None, "Also evaluate during training, every this many optimiser steps "
                                         "of each stage (val/<metric> in metrics.jsonl; a warm-up's are tagged "
                                         "warmup_step<N>); null: never.", allowed=at_least(1))
    during_warmup: bool = setting(True, "With every_steps: evaluate during the warm-up too (its learning curve). "
                                  "false: during the main stage only (each evaluation of a task with an extra "
                                  "held-out set scores that set too, which a long warm-up pays for many times).")
    during_num_samples: int = setting(50, "Held-out samples for the evaluations during training (drawn with "
                                      "eval.seed, the same rows each time).",
                                      allowed=at_least(1))
    num_samples: Optional[int] = setting(None, "Held-out samples, drawn with eval.seed in file order (not the "
                                         "first rows); null: the whole held-out split.",
                                         allowed=at_least(1))
    batch_size: int = setting(16, "Prompts generated at once.", allowed=at_least(1))
    max_new_tokens: Optional[int] = setting(None, "Most new tokens per answer; null: the trainer's "
                                            "max_completion_length.", allowed=at_least(1))
    temperature: Optional[float] = setting(None, "null (or 0): greedy decoding. A temperature samples instead (from "
                                           "seed, the same draws every evaluation): the policy an RL trainer "
                                           "optimises when it samples at that temperature.", allowed=at_least(0))
    seed: int = setting(0, "Seed of sampled evaluations and of drawn held-out samples.")
    merged_copy: bool = setting(True, "Generate from the LoRA adapter merged into a copy of the projections it "
                                "adapts (plain matmuls, faster; the copy stays in memory, shared with "
                                "trainer.fast_generation's). Skipped where the model is sharded or quantized. false: "
                                "the unmerged adapter. See docs/performance.md.")
    turn_cache_mb: int = setting(2048, "(Tasks with tools) MiB of keys and values kept between the turns of an "
                                 "evaluation's episodes, so each turn prefills only what came since the last one; "
                                 "0: every turn prefilled whole. See docs/performance.md.", allowed=at_least(0))
    mismatches_printed: int = setting(3, "Wrong answers printed after each evaluation.", allowed=at_least(0))
    confidence_decoding: ConfidenceDecoding = setting(
        ConfidenceDecoding.most_likely, "(Tasks that state a confidence, greedy evaluation) How the tag's number is "
        "chosen: most_likely (greedy), expected (the scale's number nearest the mean of the model's distribution "
        "over it) or mean (that mean, rounded to a whole number). The answer stays greedy. See "
        "docs/concepts/oracle.md.")
    closing_table: ClosingTable = setting(
        ClosingTable.headline, "The table at the end of the run: headline (accuracy per condition, AUROC, AUROC "
        "within a question text, ECE, parse rate, a task's per-category accuracy) or full (also text rule, Brier "
        "and its terms, conf std, selective accuracy...). eval.json holds every figure.")
    select_metric: Optional[str] = setting(
        None, "Chooses each stage's final adapter by this figure of its evaluations during training and at its end "
        "(task.data.eval_split=validation); the test split is scored once, on it. A name the task's evaluation "
        "reports (accuracy, ece, auroc...); null: the last step. See docs/concepts/checkpoint_selection.md.")
    select_mode: SelectMode = setting(
        SelectMode.auto, "With select_metric: max (higher is better), min, or auto: min for error-like figures "
        "(ece, mce, brier, aurc, loss, nll, error, kl), max for the others. Ties go to the earliest step; a NaN "
        "never wins over a number.")
