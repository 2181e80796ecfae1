"""task=tool_json: JSON-only tool-calling answers, trained by SFT on the expected JSON and scored by rule rewards."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import datasets

from ao_calib.calibration import parse_epistemic_status
from ao_calib.core.errors import AOCalibError
from ao_calib.core.io import ensure_generated
from ao_calib.rewards import RewardFn
from ao_calib.task_api import TRAJECTORY, Task, TaskData
from ao_calib.tools import Tools, chat_format
from ao_calib.tools.episodes import SILENT_TOOLS

from .config import ToolJsonTaskConfig
from .episodes import EPISODE_FIGURES, episode_rates, episode_reward, score_episode, trajectory
from .generate import generate_three_splits
from .data import load_rows
from .prompts import expected_output, messages
from .rewards import REWARD_FUNCTIONS, make_calibrated_args, same_answer, score_completion
from .tools import calculator, python

log = logging.getLogger(__name__)


class ToolJsonTask(Task):
    config_class = ToolJsonTaskConfig
    calibrated_reward = "calibrated_args"  # reward=calibrated_tool_json
    prediction_columns = ("kind", "category", "tool_needed")
    reference_column = "completion"  # the expected JSON output

    def build_data(self, tokenizer, model=None) -> TaskData:
        data = self.config.data
        if data.train_path:
            if not data.test_path:
                raise AOCalibError("task.data.train_path is set: also set task.data.test_path (the held-out split)")
            train_path, held_out_path = Path(data.train_path), Path(data.test_path)
        else:
            train_path, held_out_path = self._generated_files()
        train, held_out = load_rows(train_path), load_rows(held_out_path)
        log.info("tool_json data: %d train rows (%s), %d %s rows (%s)", len(train), train_path, len(held_out),
                 data.eval_split, held_out_path)
        if not self.multi_turn:
            return TaskData(train=self._dataset(train), test=self._dataset(held_out))
        chat_format.install(tokenizer, chat_format.JSON_TOOL_CALL, "task.episode=multi_turn")
        tools = Tools((calculator, python), self.config.max_tool_calls)
        return TaskData(train=self._dataset(train), test=self._dataset(held_out), tools=tools,
                        conditions=(SILENT_TOOLS,))

    @property
    def multi_turn(self) -> bool:
        return self.config.episode == "multi_turn"

    def gives_tools(self) -> bool:
        return self.multi_turn

    def _generated_files(self) -> tuple[Path, Path]:
        """(train file, the file of the split evaluations score), cached per generator setting."""
        gen = self.config.data.generate
        seed = self.context.seed_or(gen.seed)
        name = (f"n{gen.n}-test{gen.test_fraction}-val{gen.validation_fraction}-s{seed}"
                + ("" if gen.code_quotes == "repr" else f"-{gen.code_quotes}"))
        folder = Path(self.context.cache_dir) / "data" / "tool_json" / name

        def build() -> list[str]:
            splits = generate_three_splits(gen.n, seed, gen.test_fraction, gen.validation_fraction,
                                           code_quotes=gen.code_quotes)
            return [json.dumps(rows, indent=1) for rows in splits]

        train_path, validation_path, test_path = ensure_generated(
            [folder / "train.json", folder / "validation.json", folder / "test.json"], build)
        return train_path, validation_path if self.config.data.eval_split == "validation" else test_path

    def _dataset(self, rows: list[dict]) -> datasets.Dataset:
        suffix = self.config.confidence_instruction if self.calibrated else ""
        out, unreached = [], []
        for row in rows:
            chat = messages(row, self.multi_turn)
            chat[-1] = {**chat[-1], "content": chat[-1]["content"] + suffix}
            episode = trajectory(row) if self.multi_turn else None
            if episode and len(episode) > 1 and not same_answer(episode[1]["content"].strip(), row["expected_answer"]):
                unreached.append(row.get("id"))
            # tool_args is kept as JSON text: Arrow would merge {"expression"} and {"code"} into one struct.
            out.append({**row, "tool_args": json.dumps(row["tool_args"]), "prompt": chat,
                        "completion": expected_output(row)}
                       | ({TRAJECTORY: json.dumps(episode, ensure_ascii=False)} if episode else {}))
        if unreached:  # the warm-up would teach an answer the tool's result does not give
            log.warning("tool_json: %d of %d rows' expected call does not return their expected_answer when run "
                        "(first: %s); their trajectories show the tool's real result", len(unreached), len(rows),
                        ", ".join(map(str, unreached[:3])))
        return datasets.Dataset.from_list(out)

    def reward_functions(self, data: TaskData | None) -> dict[str, RewardFn]:
        return {**REWARD_FUNCTIONS, "calibrated_args": make_calibrated_args(self.config.calibration),
                "episode_reward": episode_reward}

    @property
    def headline_metric(self) -> str:
        """The answer is semantically right: the one message's call or answer (single turn), the episode's final
        answer (multi turn)."""
        return "answer_correct" if self.multi_turn else "args_reward"

    def score(self, completions: list, rows: list[dict], data: TaskData) -> list[dict[str, float]]:
        if self.multi_turn:
            return [score_episode(c, r) for c, r in zip(completions, rows)]
        return [self.score_one(c, r) for c, r in zip(completions, rows)]

    def aggregate(self, records: list[dict], run_dir, tag: str) -> dict[str, float]:
        metrics = super().aggregate(records, run_dir, tag)
        if self.multi_turn:
            metrics.update(episode_rates(records))
        return metrics

    def metric_names(self) -> frozenset[str]:
        # the figures score_completion (single turn) or score_episode and episode_rates (multi turn) add
        extra = EPISODE_FIGURES if self.multi_turn else {"total", "valid_json", "correct_format", "correct_tool"}
        return super().metric_names() | extra

    def score_one(self, completion: str, row: dict) -> dict[str, float]:
        status = parse_epistemic_status(completion)
        scores = score_completion(status.answer if status.parsed else completion, row)
        if self.calibrated:
            scores["confidence"] = status.confidence / 100
        return scores
