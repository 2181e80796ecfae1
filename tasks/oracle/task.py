"""task=oracle: an Activation Oracle reads a target prompt's activations and answers with its confidence. The
task is a facade: its rows come from ``rows`` (sources, each stage's rows) and ``build`` (activations, steering),
the scoring from ``scoring``, the confidences it must beat from ``baselines`` and the paper's classification data and
suite from ``classification``."""

from __future__ import annotations

import dataclasses
import functools
import logging
import random
from pathlib import Path

from ao_calib.core.errors import AOCalibError
from ao_calib.rewards import RewardFn
from ao_calib.runs.run_dir import RunDir
from ao_calib.runtime import distributed
from ao_calib.task_api import Task, TaskContext, TaskData, TaskRequirements, calibration_figure_names

from . import scoring
from .rows import stages as stage_rows
from .baselines.answer_probability import Baselines
from .build import build_oracle_data
from .config import OracleTaskConfig
from .rows.format_warmup import format_targets
from .rows.held_out import load_held_out_rows
from .prompt import JUDGE_PROMPT
from .rewards import make_oracle_reward
from .rows.oracle import as_dataset
from .rows.sources import SourceRows, check_judge_only_setup, source_rows
from .classification.suite import classification_suite

log = logging.getLogger(__name__)


class OracleTask(Task):
    config_class = OracleTaskConfig
    headline_metric = "correct"
    prediction_columns = ("question", "kind", "source_id", "readable", "dataset", "in_distribution", "subset",
                          "question_form", "label", "asked")
    injects_activations = True

    def __init__(self, config: OracleTaskConfig, context: TaskContext):
        super().__init__(config, context)
        if config.data.train_path and not config.data.test_path:
            raise AOCalibError("task.data.train_path is set: also set task.data.test_path (the held-out split)")
        # read and checked here, so that a bad held-out file is refused before any model loads
        self._held_out_file = (load_held_out_rows(config.data.test_path, all_paraphrases=config.data.classification
                                                  .all_paraphrases) if config.data.test_path else None)
        self._check_stages(config, context.stages)

    @staticmethod
    def _check_stages(config: OracleTaskConfig, stages) -> None:
        """Row switches the run's stages cannot use, refused before any model loads."""
        rl = config.rl_rows
        for key in ("none_fraction", "unreadable_fraction", "expected_over_draw", "reserved_prompts"):
            if getattr(rl, key) and stages and stages[-1] == "sft":  # SFT would imitate coin-flip labels
                raise AOCalibError(f"task.rl_rows.{key}={getattr(rl, key)} shapes the rows of an RL stage, but the "
                                   f"main stage is trainer=sft; set task.rl_rows.{key}=0 or use an RL trainer")
        if rl.reserved_prompts and stages and len(stages) < 2:
            raise AOCalibError(f"task.rl_rows.reserved_prompts={rl.reserved_prompts} keeps prompts from a warm-up "
                               f"for the RL stage, and this run's stages are {list(stages)}: add a warm-up or set "
                               "it to 0")
        none = config.warmup_rows.none_fraction
        if none and stages and not (len(stages) > 1 and stages[0] == "sft"):
            raise AOCalibError(f"task.warmup_rows.none_fraction={none} adds rows to an SFT warm-up, and this run's "
                               f"stages are {list(stages)}: use warmup=sft or set it to 0")

    @property
    def data_seed(self) -> int:
        """The generator's seed: ``task.data.generate.seed`` when set, else the run's ``trainer.seed``."""
        return self.context.seed_or(self.config.data.generate.seed)

    def requirements(self, need_adapter: bool = True) -> TaskRequirements:
        """The pretrained oracle adapter (a stand-in built here for a tiny model) and WildChat's hub data set."""
        adapter = None
        if need_adapter and self.config.stand_in.enabled:
            from .stand_in import ensure_stand_in_oracle

            adapter = str(ensure_stand_in_oracle(self.config, self.context))
        elif need_adapter:
            adapter = self.context.model.ao_lora_id
        path = self.config.data.path
        return TaskRequirements(adapter=adapter, hub_datasets=(path,) if path and not Path(path).exists() else ())

    def judge_prompt(self) -> str:
        return JUDGE_PROMPT

    # ------------------------------------------------------------------------------------------ data

    def source_rows(self) -> SourceRows:
        """The data source's training, held-out and validation rows (``sources.source_rows``)."""
        data = self.config.data
        rows = source_rows(data, self.data_seed, self.context.seed_or(data.classification.seed))
        if rows.train and rows.train[0]["answer"] is None:
            check_judge_only_setup(self.context.judge, self.context.stages)
        return rows

    def build_data(self, tokenizer, model) -> TaskData:
        """The rows and their activations; ``state`` is the ``OracleBuild`` (the extraction model, the stores) the
        later steps read."""
        built, data = build_oracle_data(self.config, self.context, self.source_rows(), self._held_out_file,
                                        self.data_seed, tokenizer, model)
        return dataclasses.replace(data, state=built)

    def main_stage_data(self, stage, data: TaskData) -> TaskData:
        """The RL stage's rows (``stage_rows.rl_rows``, ``task.rl_rows``); the warm-up sees none of its copies."""
        if not self.config.rl_rows.shapes_rows():
            return data
        rows = stage_rows.rl_rows(data.train.to_list(), self.config.rl_rows, data.steering.store, self.data_seed)
        return data.with_train(as_dataset(rows))

    def warmup_data(self, stage, model, tokenizer, data: TaskData, run_dir: RunDir) -> TaskData:
        """The rows of the prompts ``task.rl_rows.reserved_prompts`` leaves to the warm-up (all when 0), and then
        ``warmup=sft``: the rows ``task.warmup_rows`` shapes (``stage_rows.warmup_rows``).
        ``warmup=format``: the oracle answers the training questions itself (greedy, activations injected);
        each answer keeps its words and gets a tag: 100 × the judge's mean informativeness of the own answers of
        its kind (``confidence=kind_mean``, a calibrated start, moved by up to ``confidence_jitter`` so that groups
        differ), of that answer alone (``judge``), or a draw from ``task.warmup_rows.confidences`` (``spread``).
        The targets are written to ``warmup_targets.jsonl`` in the run directory."""
        if self.config.rl_rows.reserved_prompts:
            data = data.with_train(as_dataset(stage_rows.prompts_of_stage(
                data.train.to_list(), self.config.rl_rows.reserved_prompts, self.data_seed, rl=False)))
        if stage.name != "format":
            if not stage_rows.warmup_shapes_rows(self.config.warmup_rows):
                return data
            rows = stage_rows.warmup_rows(data.train.to_list(), self.config.warmup_rows, data.steering.store,
                                          self.data_seed, lambda row, rng: self.asked_openly(row, rng, data))
            return data.with_train(as_dataset(rows))
        from ao_calib.evaluation.generation import generate_completions

        rows = data.train.to_list()[: stage.num_questions or None]
        raw = distributed.map_split(lambda share: generate_completions(
            model, tokenizer, share, chat_template_kwargs=dict(self.context.model.chat_template_kwargs),
            max_new_tokens=stage.max_new_tokens, batch_size=stage.generation_batch_size, steering=data.steering,
            desc="format warm-up: own answers"), rows)
        # Judged, written and printed once; every process trains on the same targets.
        targets = distributed.on_main(lambda: format_targets(stage, rows, raw, run_dir,
                                                             functools.partial(self.judge_answers, data=data),
                                                             self.context.judge is not None,
                                                             self.config.warmup_rows.confidences))
        return data.with_train(as_dataset(targets))

    def asked_openly(self, row: dict, rng: random.Random, data: TaskData) -> dict:
        """``row`` of ``data`` asked as an open question about its fact (``stage_rows.asked_openly``)."""
        return stage_rows.asked_openly(row, rng, self.config.warmup_rows, data.steering.store,
                                       self.config.data.generate.phrasings, self.config.prompt.confidence_instruction)

    def oracle_rows(self, data: TaskData, rows: list[dict], tokenizer, model, seed: int = 0) -> list[dict]:
        """Oracle rows (their activations extracted by ``model``) for more labelled rows, beside ``data``'s
        (``OracleBuild.more_rows``)."""
        return data.state.more_rows(rows, model, tokenizer, seed=seed)

    # --------------------------------------------------------------------------------- rewards / eval

    def confidence_scale(self) -> list[int]:
        """The numbers the warm-up teaches the oracle to state (``task.warmup_rows.confidences``)."""
        return list(self.config.warmup_rows.confidences)

    @staticmethod
    def judge(data: TaskData):
        """The run's judge, which ``data`` carries (the framework builds it: ``with_run_judge``)."""
        if data.judge is None:
            raise AOCalibError("task=oracle needs a judge to score answers: judge=label (known yes/no answers) "
                               "or judge=litellm")
        return data.judge

    def reward_functions(self, data: TaskData | None) -> dict[str, RewardFn]:
        return {"calibration": make_oracle_reward(None if data is None else self.judge(data),
                                                  self.config.calibration)}

    def score_one(self, completion: str, row: dict) -> dict[str, float]:
        """One completion of a row with a yes/no reference answer, against it (``scoring.score_one``)."""
        return scoring.score_one(completion, row, self.config.calibration)

    def score(self, completions: list[str], rows: list[dict], data: TaskData) -> list[dict[str, float]]:
        """Each row by ``checked_against_reference``'s rule, the judge scoring the others (``scoring.score``)."""
        return scoring.score(completions, rows, self.config.calibration,
                             functools.partial(self.judge_answers, data=data))

    def judge_answers(self, rows: list[dict], answers: list[str], data: TaskData) -> list[float | None]:
        """The judge's informativeness of each answer, outside training (``scoring.judge_answers``)."""
        return scoring.judge_answers(self.judge(data), rows, answers)

    def baselines(self, data: TaskData) -> Baselines:
        """The baselines beside an evaluation of ``data``'s rows."""
        return Baselines(self.config, data.state, self.context.eval_seed, self.data_seed,
                         dict(self.context.model.chat_template_kwargs),
                         functools.partial(self.score, data=data))

    def extra_evaluations(self, model, tokenizer, generate, run_dir: RunDir, tag: str, data: TaskData) -> dict:
        from .baselines.methods import per_dataset, probe_readability

        built = data.state
        baselines = self.baselines(data)
        out = baselines.answer_probability(model, tokenizer, generate, run_dir, tag)
        if scoring.scores_held_out_rows(tag) and self.config.baselines_suite:
            suite = baselines.suite(model, tokenizer, run_dir, tag)
            out = {**out, "baselines": {**out.get("baselines", {}), **suite}}
        probe = None
        if scoring.scores_held_out_rows(tag) and self.config.data.classification.enabled:
            probe = distributed.on_main(lambda: probe_readability(built, model, tokenizer,
                                                                  self.config.baselines_probe_c, self.data_seed))
            out["probe_validation_accuracy"] = probe
        figures = distributed.on_main(lambda: per_dataset(run_dir, tag, ("control", "none"), probe))
        if figures is not None:
            out["per_dataset"] = figures
        if not self.config.classification.enabled:
            return out
        return {**out, **classification_suite(self.config.classification, built, self.config.eval_control,
                                              model, tokenizer, generate, functools.partial(self.score, data=data),
                                              run_dir, tag)}

    def metric_names(self) -> frozenset[str]:
        # the stated number's calibration figures on every run (aggregate computes them whatever the reward), and
        # aggregate's own figures (judge_failed and informativeness only on judged rows)
        return super().metric_names() | {*calibration_figure_names(), "confidence", "parse_rate",
                                          "calibration_reward", "informativeness", "judge_failed"}

    def aggregate(self, records: list[dict], run_dir: RunDir, tag: str) -> dict[str, float]:
        """Calibration figures over an evaluation's records (``scoring.aggregate``)."""
        return scoring.aggregate(records, run_dir, tag)
