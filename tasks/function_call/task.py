"""task=function_call: data, rewards and scoring wired into the runner's Task interface."""

from __future__ import annotations

import collections
import functools
import json
import logging
from pathlib import Path

import datasets

from ao_calib.calibration import parse_epistemic_status
from ao_calib.core.errors import AOCalibError, DataValidationError
from ao_calib.core.io import ensure_generated
from ao_calib.rewards import RewardFn
from ao_calib.task_api import Task, TaskContext, TaskData

from . import bfcl, bfcl_multi_turn
from .bfcl_rewards import make_rewards as make_bfcl_rewards, score_case
from .config import FunctionCallTaskConfig
from .data import load_rows
from .generate import generate_splits
from .no_call import answer_no_call_only_if_sure, is_empty
from .rewards import REWARD_FUNCTIONS, make_calibrated_overall, score_completion

log = logging.getLogger(__name__)


class FunctionCallTask(Task):
    config_class = FunctionCallTaskConfig
    headline_metric = "tool_call_exact"
    calibrated_reward = "calibrated_overall"  # reward=calibrated_function_call
    # BFCL rows carry their case (the function docs and the possible answers, as JSON text), so a predictions row is
    # rescored by anyone's checker (BFCL's bfcl-eval included) without the data it came from
    prediction_columns = ("id", "kind", "bfcl_functions", "bfcl_ground_truth")

    def __init__(self, config: FunctionCallTaskConfig, context: TaskContext):
        super().__init__(config, context)
        if self.bfcl or self.multi_turn:
            self.headline_metric = "bfcl_ast"  # BFCL's AST accuracy (multi-turn: its checker's); per category too
        if self.multi_turn:
            self.reference_column = "bfcl_ground_truth"  # each user turn's calls: an episode has no one answer
        if config.min_no_call_probability is not None:
            from ao_calib.runtime import distributed

            if self.calibrated:
                raise AOCalibError("task.min_no_call_probability reads the probability of an empty answer at the "
                                   "answer's start, where a calibrated reward mix puts the confidence tag: leave it "
                                   "null with reward=calibrated_function_call")
            if distributed.sharded():
                # its second look generates one row at a time on some ranks only; a sharded forward is collective
                raise AOCalibError("task.min_no_call_probability is for one process or DDP, not a sharded model: "
                                   "leave it null under FSDP or DeepSpeed ZeRO")

    @property
    def bfcl(self) -> bool:
        return self.config.data.format == "bfcl"

    @property
    def multi_turn(self) -> bool:
        """Generated multi-turn cases over BFCL's classes (``multi_turn_generate``)."""
        return self.config.data.format == "multi_turn"

    def gives_tools(self) -> bool:
        return self.multi_turn  # GRPO's episodes over each case's instances (BFCL's held-out cases: evaluation only)

    def build_data(self, tokenizer, model=None) -> TaskData:
        data_cfg = self.config.data
        if self.bfcl:
            return self._bfcl_data()
        if self.multi_turn:
            return self._generated_multi_turn_data(tokenizer)
        if data_cfg.train_path:
            train_path = Path(data_cfg.train_path)
            if not data_cfg.test_path:
                raise AOCalibError("task.data.train_path is set: also set task.data.test_path (the held-out split)")
            test_path = Path(data_cfg.test_path)
        else:  # generated rows; a test_path alone replaces the generated held-out split
            train_path, test_path = self._generated_files()
            test_path = Path(data_cfg.test_path) if data_cfg.test_path else test_path
        train_rows, test_rows = load_rows(train_path), load_rows(test_path)
        if data_cfg.max_train_samples:
            train_rows = train_rows[: data_cfg.max_train_samples]
        log.info("function_call data: %d train rows (%s), %d test rows (%s)",
                 len(train_rows), train_path, len(test_rows), test_path)
        suffix = self.config.confidence_instruction if self.calibrated else ""
        return TaskData(train=_as_chat_dataset(train_rows, suffix), test=_as_chat_dataset(test_rows, suffix))

    def _bfcl_data(self) -> TaskData:
        data_cfg = self.config.data
        gen = data_cfg.generate
        seed = self.context.seed_or(gen.seed)
        if data_cfg.train_path and not data_cfg.test_path:
            raise AOCalibError("task.data.format=bfcl: task.data.train_path is set: also set task.data.test_path "
                               "(BFCL question files or folders)")
        # Without a train_path, the generator's cases; a test_path alone (e.g. real BFCL data, scored by
        # `ao_calib.eval ... task.data.test_path=DIR`) replaces only the generated held-out split.
        train = (bfcl.load_cases(data_cfg.train_path) if data_cfg.train_path else
                 bfcl.generated_cases(gen.n_train, seed, "train", gen.bfcl_distractors, gen.bfcl_irrelevance,
                                      gen.bfcl_synthetic, gen.bfcl_near_miss, gen.bfcl_parallel_each,
                                      gen.bfcl_context, gen.bfcl_parallel_story))
        split = data_cfg.eval_split  # "validation": a third stream of generated cases, for choosing settings
        multi_turn = bfcl_multi_turn.multi_turn_files(data_cfg.test_path) if data_cfg.test_path else []
        if multi_turn:  # BFCL's multi-turn cases: episodes over their API instances, scored by BFCL's checker
            return self._bfcl_multi_turn_data(train, multi_turn)
        test = (bfcl.load_cases(data_cfg.test_path) if data_cfg.test_path else
                bfcl.generated_cases(gen.n_test, seed, split, gen.bfcl_distractors, gen.bfcl_irrelevance))
        overlap = {c["id"] for c in train} & {c["id"] for c in test}
        if overlap:
            raise AOCalibError(f"task.data: {len(overlap)} BFCL ids are in both train and test "
                               f"(e.g. {sorted(overlap)[0]}); evaluation would score memorised cases")
        if data_cfg.max_train_samples:
            train = train[: data_cfg.max_train_samples]
        log.info("function_call BFCL data: %d train cases, %d %s cases", len(train), len(test), split)
        suffix = self.config.confidence_instruction if self.calibrated else ""
        docs = data_cfg.bfcl_docs
        return TaskData(train=datasets.Dataset.from_list([bfcl.training_row(c, suffix, docs) for c in train]),
                        test=datasets.Dataset.from_list([bfcl.training_row(c, suffix, docs) for c in test]))

    def _bfcl_multi_turn_data(self, train: list[dict], files: list[Path]) -> TaskData:
        """Held-out BFCL multi-turn cases (evaluation only): each row an episode over its case's API instances
        (``TaskData.row_tools``), its later user turns fed one at a time."""
        cases = bfcl_multi_turn.load_files(files)
        docs = self.config.data.bfcl_docs
        log.info("function_call BFCL data: %d train cases, %d multi-turn test cases (%s)", len(train), len(cases),
                 ", ".join(f.name for f in files))
        suffix = self.config.confidence_instruction if self.calibrated else ""
        return TaskData(train=datasets.Dataset.from_list([bfcl.training_row(c, suffix, docs) for c in train]),
                        test=datasets.Dataset.from_list([bfcl_multi_turn.evaluation_row(c, docs) for c in cases]),
                        row_tools=self._row_tools())

    def _generated_multi_turn_data(self, tokenizer) -> TaskData:
        """The generator's multi-turn cases: training rows whose SFT target is the whole ground-truth episode
        (``TRAJECTORY``: calls, results, the later user turns; the model's turns alone in the loss), and held-out
        episodes over each case's instances. ``generate.n_test`` cases each for validation and test."""
        from ao_calib.tools import TRAJECTORY, chat_format

        from .multi_turn_generate import generate_cases, split_cases

        data_cfg, gen = self.config.data, self.config.data.generate
        seed = self.context.seed_or(gen.seed)
        total = gen.n_train + 2 * gen.n_test
        train, validation, test = split_cases(generate_cases(total, seed), gen.n_test / total, gen.n_test / total, seed)
        held_out = validation if data_cfg.eval_split == "validation" else test
        if tokenizer is not None:  # the model's text rendered as written, its turns marked for the SFT loss
            chat_format.install_template(tokenizer, chat_format.JSON_TOOL_CALL, "task.data.format=multi_turn")
        docs, kind = data_cfg.bfcl_docs, "generated_multi_turn"
        rows = [{**bfcl_multi_turn.evaluation_row(c, docs, kind), TRAJECTORY: json.dumps(
            bfcl_multi_turn.trajectory(c))} for c in train]
        log.info("function_call multi-turn data: %d train cases, %d %s cases", len(train), len(held_out),
                 data_cfg.eval_split)
        return TaskData(train=datasets.Dataset.from_list(rows),
                        test=datasets.Dataset.from_list([bfcl_multi_turn.evaluation_row(c, docs, kind)
                                                         for c in held_out]),
                        row_tools=self._row_tools())

    def _row_tools(self):
        """Each multi-turn row's tools, its turns bounded by ``task.max_steps_per_turn``."""
        return functools.partial(bfcl_multi_turn.row_tools, max_steps=self.config.max_steps_per_turn)

    def _generated_files(self) -> tuple[Path, Path]:
        """Generated splits are cached per generator setting, so every job of a sweep trains on the same rows."""
        gen = self.config.data.generate
        seed = self.context.seed_or(gen.seed)
        folder = Path(self.context.cache_dir) / "data" / "function_call" / f"n{gen.n_train}-t{gen.n_test}-s{seed}"

        def build() -> list[str]:
            splits = generate_splits(gen.n_train, gen.n_test, seed)
            return ["".join(json.dumps(row) + "\n" for row in rows) for rows in splits]

        train_path, test_path = ensure_generated([folder / "train.jsonl", folder / "test.jsonl"], build)
        return train_path, test_path

    def reward_functions(self, data: TaskData | None) -> dict[str, RewardFn]:
        rewards = {**REWARD_FUNCTIONS, "calibrated_overall": make_calibrated_overall(self.config.calibration)}
        if self.bfcl:
            rewards.update(make_bfcl_rewards(self.config.strict_format))
        if self.multi_turn:
            rewards["turn_reward"] = bfcl_multi_turn.turn_reward
        return rewards

    def score(self, completions: list[str], rows: list[dict], data: TaskData) -> list[dict[str, float]]:
        return [self.score_one(c, r) for c, r in zip(completions, rows)]

    def score_one(self, completion, row: dict) -> dict[str, float]:
        if "bfcl_case" in row:  # a BFCL multi-turn case's episode
            return bfcl_multi_turn.score_episode(completion, row)
        scores = score_completion(completion, row["answer"], row.get("possible_boxed_answers"))
        if self.bfcl:
            bfcl_scores = score_case(_plain_text(completion), json.loads(row["bfcl_functions"]),
                                     json.loads(row["bfcl_ground_truth"]), self.config.strict_format)
            bfcl_scores.pop("error_type")
            scores.update(bfcl_scores)
        if self.calibrated:
            scores["confidence"] = parse_epistemic_status(completion).confidence / 100
        return scores

    def score_row(self, row: dict, source: str, index: int, line_no: int) -> dict:
        """A BFCL case (``id``, ``question``, ``function``, ``possible_answer``) and its ``completion``: BFCL's
        verdict as ``valid``, the ``bfcl_*`` reward components, BFCL's ``error_type`` and the ``category``."""
        case = bfcl.validate_case(row, source, index, line_no)
        completion = row.get("completion") if isinstance(row, dict) else None
        if not isinstance(completion, str):
            raise DataValidationError(source, index, "completion", f"(line {line_no}) expected a string, got "
                                                                   f"{type(completion).__name__}")
        scores = score_case(_plain_text(completion), case["function"], case["ground_truth"],
                            self.config.strict_format)
        return {"valid": scores["bfcl_ast"] == 1.0, **scores, "category": case["category"]}

    def revise_answers(self, model, tokenizer, rows: list[dict], answers: list[str], *, chat_template_kwargs: dict,
                       max_new_tokens: int) -> list[str]:
        """``min_no_call_probability``: each empty answer the model is not that sure of, replaced by its best call."""
        threshold = self.config.min_no_call_probability
        if threshold is None:
            return answers
        revised, replaced, empty = answer_no_call_only_if_sure(model, tokenizer, rows, answers, threshold=threshold,
                                                               chat_template_kwargs=chat_template_kwargs,
                                                               max_new_tokens=max_new_tokens)
        log.info("%d of %d empty answers (of %d) replaced by the best call: p(no call) below %s", replaced, empty,
                 len(answers), threshold)
        return revised

    def extra_evaluations(self, model, tokenizer, generate, run_dir, tag: str, data: TaskData) -> dict:
        """``task.data.extra_test_path`` (``extra_validation_path`` under ``eval_split=validation``) scored beside
        the held-out split, at every evaluation."""
        data_cfg = self.config.data
        path = self._extra_path()
        if not path:
            return {}
        from ao_calib.evaluation.evaluate import score_and_record
        from ao_calib.runtime import distributed

        rows = self.extra_rows()
        completions = generate(rows, desc=f"{tag}_extra")
        metrics, _ = distributed.on_main(
            lambda: score_and_record(self, data, rows, completions, run_dir, tag, "extra", 0))
        if distributed.is_main():
            print(f"[eval:{tag}_extra] {len(rows)} samples of {path}, accuracy "
                  f"({self.headline_metric}) = {metrics['accuracy']:.3f}", flush=True)
        return {"extra_test": {"path": str(path), "split": data_cfg.eval_split, "num_samples": len(rows),
                               "metrics": metrics}}

    def _extra_path(self) -> str | None:
        data_cfg = self.config.data
        return data_cfg.extra_validation_path if data_cfg.eval_split == "validation" else data_cfg.extra_test_path

    def extra_rows(self) -> list[dict]:
        """The rows of the extra held-out set an evaluation scores (``extra_test_samples`` of them, drawn with
        ``eval.seed``: the same rows at every evaluation), in the order of its predictions file."""
        from ao_calib.evaluation.evaluate import held_out_sample

        path = self._extra_path()
        suffix = self.config.confidence_instruction if self.calibrated else ""
        if self.multi_turn:  # BFCL's multi-turn cases, played as episodes over their instances (data.row_tools)
            rows = [bfcl_multi_turn.evaluation_row(c, self.config.data.bfcl_docs)
                    for c in bfcl_multi_turn.load_files(bfcl_multi_turn.multi_turn_files(path))]
        elif self.bfcl:
            rows = [bfcl.training_row(c, suffix, self.config.data.bfcl_docs) for c in bfcl.load_cases(path)]
        else:
            rows = _as_chat_dataset(load_rows(path), suffix).to_list()
        chosen = held_out_sample(len(rows), self.config.data.extra_test_samples, self.context.eval_seed)
        return [rows[i] for i in chosen]

    def metric_names(self) -> frozenset[str]:
        if not (self.bfcl or self.multi_turn):
            return super().metric_names()
        categories = (*bfcl.SUPPORTED_CATEGORIES, *bfcl_multi_turn.CATEGORIES, "generated_multi_turn", "all",
                      "category_mean")
        multi_turn = {"turns_passed", "calls", "tool_errors", "malformed_calls",
                      *(f"fail_{name}" for name in (*bfcl_multi_turn.FAILURES, "other"))}
        return (super().metric_names() | {f"ast_accuracy/{kind}" for kind in categories} | multi_turn
                | {"empty_where_call_needed"})

    def aggregate(self, records: list[dict], run_dir, tag: str) -> dict[str, float]:
        metrics = super().aggregate(records, run_dir, tag)
        if (self.bfcl or self.multi_turn) and records:
            by_category = category_accuracy(records)
            metrics.update(by_category)
            counts = collections.Counter(r.get("kind") or "all" for r in records)
            print(f"[eval:{tag}] BFCL AST accuracy by category: " + " | ".join(
                f"{k.split('/', 1)[1]} {v:.3f}" + (f" (n={counts[k.split('/', 1)[1]]})" if k.split("/", 1)[1] in counts
                                                  else "") for k, v in by_category.items()), flush=True)
            empty = empty_answer_rate(records)
            if empty is not None:
                metrics["empty_where_call_needed"] = empty
                print(f"[eval:{tag}] empty answers (\"\" or []) where a call is needed: {empty:.3f}", flush=True)
        return metrics


def _plain_text(completion: str) -> str:
    status = parse_epistemic_status(completion)
    return status.answer if status.parsed else completion


def empty_answer_rate(records: list[dict]) -> float | None:
    """The share of cases that need a call (every BFCL category but irrelevance) answered with nothing: an empty
    text or ``[]`` (the cheapest way to a format reward, and what a model unsure of unseen functions falls back to).
    None without such cases."""
    needed = [r for r in records if (r.get("kind") or "") not in bfcl.IRRELEVANCE_CATEGORIES
              and "episode" not in r]  # a multi-turn episode's last message is its turn's end, not its answer
    if not needed:
        return None
    return sum(is_empty(_plain_text(r["completion"])) for r in needed) / len(needed)


def category_accuracy(records: list[dict], metric: str = "bfcl_ast") -> dict[str, float]:
    """BFCL's AST accuracy per category (the leaderboard's columns): ``ast_accuracy/<category>``."""
    by_kind: dict[str, list[float]] = {}
    for record in records:
        by_kind.setdefault(record.get("kind") or "all", []).append(record["scores"][metric])
    accuracy = {f"ast_accuracy/{kind}": sum(v) / len(v) for kind, v in sorted(by_kind.items())}
    if len(accuracy) > 1:  # BFCL's summary: the unweighted mean of its categories (bfcl_ast is the mean of rows)
        accuracy["ast_accuracy/category_mean"] = sum(accuracy.values()) / len(accuracy)
    return accuracy


def _as_chat_dataset(rows: list[dict], suffix: str = "") -> datasets.Dataset:
    # A row's prompt already holds the system text, the function list and the query (the task's row format);
    # it becomes one user turn, and the model's own chat template wraps it. The expected calls are also the
    # ``completion`` a warm-up (warmup=sft) trains on: a random tiny model writes no parseable call without one.
    chat_rows = [{**row, "prompt": [{"role": "user", "content": row["prompt"] + suffix}], "completion": row["answer"]}
                 for row in rows]
    return datasets.Dataset.from_list(chat_rows)
