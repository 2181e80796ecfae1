"""The task abstraction: what the runner needs from a task.

A task is a plug-in. Its config file (``conf/task/<name>.yaml``, in this repository or in any package on
Hydra's search path) names its class by ``_target_``; the class names its config schema by ``config_class``
(a dataclass extending ``ao_calib.config.TaskConfig``). The framework never imports a task by name.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import Any, ClassVar

from omegaconf import DictConfig

from ao_calib.calibration.contract import scored_confidence
from ao_calib.config import TaskConfig, plugin_class
from ao_calib.errors import AOCalibError
from ao_calib.rewards import RewardFn
from ao_calib.run_dir import RunDir


@dataclass
class TaskData:
    """Train and held-out splits. Rows carry ``prompt`` (chat messages) and the columns reward functions read."""

    train: Any  # datasets.Dataset
    test: Any  # datasets.Dataset


class Task(ABC):
    """One training task: data, rewards and how a completion is scored for evaluation. ``cfg`` is the whole run
    config; ``cfg.task`` is typed by ``config_class``."""

    #: the schema of ``cfg.task``; every default of the task's settings is stated there
    config_class: ClassVar[type] = TaskConfig
    #: key of the per-sample score that counts as "correct" in evaluation (e.g. exact match)
    headline_metric: ClassVar[str]
    #: the reward component that trains a stated confidence, for tasks that offer one (see ``calibrated``)
    calibrated_reward: ClassVar[str | None] = None
    #: row columns copied into every predictions row (when the row has them), for anyone recomputing a figure
    prediction_columns: ClassVar[tuple[str, ...]] = ("kind",)

    def __init__(self, cfg: DictConfig):
        self.cfg = cfg

    @property
    def name(self) -> str:
        return self.cfg.task.name

    @property
    def calibrated(self) -> bool:
        """Whether the reward mix trains the ``[epistemic status: NN]`` tag: then the prompt asks for it, and
        evaluation scores the stated confidence (``confidence`` in each sample's scores)."""
        reward = self.cfg.reward
        names = set(reward.weights) | {n for phase in reward.phases for n in phase.weights}
        return self.calibrated_reward is not None and self.calibrated_reward in names

    def pretrained_adapter(self) -> str | None:
        """A pretrained adapter the task starts from (hub id or path), if any."""
        return None

    def hub_datasets(self) -> list[str]:
        """Hub data sets ``build_data`` will download, checked before the model loads (``ao_calib.preflight``)."""
        return []

    @abstractmethod
    def build_data(self, tokenizer, model) -> TaskData:
        """Train/test rows; ``model`` is there for tasks that need the base model's activations."""

    def warmup_data(self, stage: DictConfig, model, tokenizer, data: TaskData, run_dir: RunDir) -> TaskData:
        """The rows a warm-up stage trains on. ``warmup=sft`` trains on the task's own ``completion`` column;
        ``warmup=format`` (the model's own answers, tagged with a confidence) is for tasks that implement it."""
        if stage.name == "format":
            raise AOCalibError(f"task={self.name} has no format warm-up (warmup=format); use warmup=sft")
        return data

    def score_batch(self, completions: list[str], rows: list[dict]) -> list[dict[str, float]]:
        """``score`` for each completion; a task whose scores need a batched call (a judge) overrides this."""
        return [self.score(c, r) for c, r in zip(completions, rows)]

    def steering(self):
        """An ``ao_calib_tasks.oracle.steering.ActivationSteering`` when the task injects activations, else None."""
        return None

    def summary(self) -> dict:
        """Task totals for summary.json (e.g. the judge's calls, failures and cost)."""
        return {}

    def training_callbacks(self, trainer_name: str) -> list:
        """Task-specific trainer callbacks for a stage (e.g. the oracle's failure-mode alerts during GRPO)."""
        return []

    def eval_variants(self) -> list[str]:
        """Extra evaluation passes besides the plain one, for a task with steering: ``control`` (another prompt's
        activations) and ``none`` (random vectors of the same norms)."""
        return []

    def extra_evaluations(self, model, tokenizer, generate, run_dir: RunDir, tag: str) -> dict:
        """Further benchmarks run with every evaluation; ``generate(rows)`` returns greedy completions with the
        task's steering. Returns a JSON-able dict stored in eval.json under its keys. In a multi-process run every
        process calls it (``generate`` splits the rows over them and returns all completions to each), so it must
        write files and call a judge on the main process only (``ao_calib.distributed.is_main``/``on_main``)."""
        return {}

    def aggregate(self, records: list[dict], run_dir: RunDir, tag: str) -> dict[str, float]:
        """Metrics over all evaluated samples: the mean of every per-sample score, and, for a calibrated task,
        the calibration of the stated confidence against the headline score (with a reliability diagram)."""
        keys = sorted({k for r in records for k in r["scores"]})
        metrics = {k: sum(r["scores"][k] for r in records) / max(len(records), 1) for k in keys}
        metrics["accuracy"] = metrics.get(self.headline_metric, 0.0)
        if self.calibrated and records:
            conf = [scored_confidence(r["scores"]["confidence"]) for r in records]
            metrics.update({k: v for k, v in self.calibration_metrics(records, conf, [
                r["scores"][self.headline_metric] for r in records], run_dir, tag).items() if k != "accuracy"})
        return metrics

    def calibration_metrics(self, records: list[dict], confidences, outcomes, run_dir: RunDir, tag: str
                            ) -> dict[str, float]:
        """Every per-example calibration figure (``ao_calib.calibration.metrics.calibration_report``), the
        headroom over the question kinds when records carry several, and the reliability and risk-coverage
        plots of this evaluation."""
        from ao_calib.calibration import metrics as cm

        report = cm.calibration_report(confidences, outcomes)
        kinds = [r.get("kind") for r in records]
        if None not in kinds and len(set(kinds)) > 1:
            report.update(cm.kind_headroom(outcomes, kinds))
        questions = [r.get("question") for r in records]
        if records and None not in questions:
            # Does the confidence tell right from wrong among rows that ask the very same question, and does it
            # beat a rule that reads only the question's wording? (the shortcut a test bed must not reward)
            report["auroc_within_question"] = cm.within_group_auroc(confidences, outcomes, questions)
            rule = cm.group_rate_rule(outcomes, questions)
            report["text_rule_auroc"] = cm.auroc(rule, cm.binarize(outcomes))
            report["text_rule_ece"] = cm.expected_calibration_error(rule, cm.binarize(outcomes))
            report["distinct_questions"] = len(set(questions))
        if records:
            cm.plot_reliability_diagram(confidences, outcomes, run_dir.reliability_plot(tag), title=(
                f"{tag}: acc {report['accuracy']:.3f}, AUROC {report['auroc']:.3f}, ECE {report['ece']:.3f} "
                f"(n={len(records)})"))
            cm.plot_risk_coverage(confidences, outcomes, run_dir.risk_coverage_plot(tag), title=(
                f"{tag}: AURC {report['aurc']:.3f}, selective acc@50% {report['selective_accuracy@50']:.3f}"))
        return report

    @abstractmethod
    def reward_functions(self) -> dict[str, RewardFn]:
        """All reward components this task offers, by the name configs use."""

    @abstractmethod
    def score(self, completion: str, row: dict) -> dict[str, float]:
        """Every reward component (and the headline metric) for one completion, for evaluation."""

    def score_row(self, row: dict, source: str, index: int, line_no: int) -> dict:
        """``python -m ao_calib.score``: validates one row of someone's completions (raising
        ``ao_calib.errors.DataValidationError`` naming ``source``, the line and the field) and returns the
        fields its output row adds: ``valid`` (bool) and the reward components."""
        raise AOCalibError(f"task={self.name} does not score external completions (no score_row)")

    def reference_output(self, row: dict) -> str:
        """What a perfect completion looks like, shown beside mismatches."""
        return str(row.get("answer", ""))


def build_task(cfg: DictConfig) -> Task:
    """The task ``cfg.task._target_`` names, built on the whole run config."""
    cls = plugin_class("task", cfg.task.get("_target_"))
    if cls is None:
        raise AOCalibError(f"task={cfg.task.name} names no class: set task._target_ (e.g. my_pkg.task.MyTask)")
    if not (isinstance(cls, type) and issubclass(cls, Task)):
        raise AOCalibError(f"task._target_={cfg.task._target_} is not a subclass of ao_calib.task_api.Task")
    return cls(cfg)
