"""The task abstraction: what the runner needs from a task, and nothing more.

A task is a plug-in. Its config file (``conf/task/<name>.yaml``, in this repository or in any package on
Hydra's search path) names its class by ``_target_``; the class names its config schema by ``config_class``
(a dataclass extending ``ao_calib.core.plugins.TaskConfig``). The framework never imports a task by name.

The runner converts the composed config once (``build_task``): a task receives its own typed settings and a
``TaskContext`` of the few run facts it reads (the model's settings, the run's seed, the cache, the reward
names, the stages, the judge's settings), never the whole tree.
"""

from __future__ import annotations

import dataclasses
import inspect
from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import Any, ClassVar

from ao_calib.calibration.contract import scored_confidence
from ao_calib.core.errors import AOCalibError
from ao_calib.core.plugins import TaskConfig, plugin_class
from ao_calib.tools import TRAJECTORY  # noqa: F401 -- part of the task API (a row's whole episode, for SFT)
from ao_calib.evaluation.config import EvalConfig
from ao_calib.rewards import RewardFn
from ao_calib.runs.run_dir import RunDir


@dataclass
class TaskData:
    """What ``build_data`` returns: train and held-out splits (rows carry ``prompt``, chat messages, and the
    columns reward functions read), and for a task that injects activations, the steering every pass uses and
    the evaluation conditions scored beside the plain one."""

    train: Any  # datasets.Dataset
    test: Any  # datasets.Dataset
    steering: Any = None  # an ao_calib.steering.Steering when the task injects activations
    #: extra evaluation passes of a steered task: "control" (another prompt's activations), "none" (random
    #: vectors of the same norms); each writes its own predictions file
    conditions: tuple[str, ...] = ()
    #: an ``ao_calib.tools.Tools``: the functions the model may call in a multi-turn episode (GRPO's rollouts through
    #: TRL's tool loop, and every evaluation), their results going back as ``tool`` messages, out of the loss.
    #: None: single-turn completions
    tools: Any = None
    #: a row's own tools, ``row -> Tools`` (a multi-turn case's API instances): evaluation plays each held-out row's
    #: episode with them, GRPO each training row's (``ao_calib.tools.rollouts``, which also feeds a row's later user
    #: turns). None: ``tools`` for every row
    row_tools: Any = None
    #: what ``build_data`` made that the task's later steps read (the oracle's extraction model and stores); the
    #: framework hands the data back to those steps, so that the task object keeps nothing between calls
    state: Any = None
    #: the run's judge (``ao_calib.judges``), built by the framework once the model has loaded (judge=local grades
    #: with it) and shared by every split's data; None for judge=none
    judge: Any = None

    def with_train(self, train) -> "TaskData":
        """The same data with other training rows (a warm-up's)."""
        return dataclasses.replace(self, train=train)

    def with_judge(self, judge) -> "TaskData":
        """The same data carrying the run's judge."""
        return dataclasses.replace(self, judge=judge)


@dataclass(frozen=True)
class TaskRequirements:
    """What a task needs before the model loads, checked then (``ao_calib.preflight.resources``)."""

    adapter: str | None = None  # a pretrained adapter the run starts from (hub id or path)
    hub_datasets: tuple[str, ...] = ()  # hub data sets build_data will download


@dataclass(frozen=True)
class TaskContext:
    """The run's facts a task may read besides its own settings, converted once from the composed config."""

    model: Any  # ao_calib.models.config.ModelConfig: the base model's settings (layout, chat template options, ...)
    seed: int  # trainer.seed: the run's one seed, for whatever a task draws unless a task key sets its own
    cache_dir: str  # paths.cache_dir: rebuildable artefacts (generated data, activations)
    eval_seed: int  # eval.seed: drawn held-out samples
    reward_names: frozenset[str] = frozenset()  # every reward component the run's mix weighs, in any phase
    stages: tuple[str, ...] = ()  # the trainer names of the run's stages, in order (a warm-up first)
    judge: Any = None  # the judge's typed settings; None for judge=none
    lora_overrides: Any = None  # trainer.lora: the run's LoRA choices over model.lora (a task that trains one)

    def seed_or(self, explicit: int | None) -> int:
        """A task's own seed key where it is set, else the run's seed: ``trainer.seed=N`` alone changes every
        random choice of the run."""
        return int(self.seed if explicit is None else explicit)

    @classmethod
    def of(cls, cfg) -> "TaskContext":
        """The context of a composed (or saved) run config."""
        from omegaconf import OmegaConf

        from ao_calib.config.checks import run_stages
        from ao_calib.config.compose import typed
        from ao_calib.models.config import ModelConfig
        from ao_calib.models.config import LoraOverrideConfig

        reward = cfg.get("reward")
        names = frozenset() if reward is None else frozenset(
            set(reward.weights) | {n for phase in reward.phases for n in phase.weights})
        judge = cfg.get("judge")
        stages = tuple(stage.name for _, stage in run_stages(cfg))
        return cls(model=typed(cfg.model, ModelConfig), seed=int(cfg.trainer.seed),
                   cache_dir=str(cfg.paths.cache_dir), reward_names=names, stages=stages,
                   judge=None if judge is None or judge.get("_target_") is None else OmegaConf.to_object(judge),
                   eval_seed=typed(cfg.eval, EvalConfig).seed,  # a saved run's eval.* over the schema's defaults
                   lora_overrides=typed(cfg.trainer.lora, LoraOverrideConfig))


class Task(ABC):
    """One training task. ``config`` is its own settings (an instance of ``config_class``), ``context`` the run
    facts it may read. The methods below are the steps a run calls, in the order it calls them; everything
    else a task needs is its own helper. A task keeps nothing between the steps: what ``build_data`` made travels
    in the ``TaskData`` it returns (``state``), which the framework hands back to the later steps."""

    #: the schema of ``cfg.task``; every default of the task's settings is stated there
    config_class: ClassVar[type] = TaskConfig
    #: key of the per-sample score that counts as "correct" in evaluation (e.g. exact match)
    headline_metric: ClassVar[str]
    #: the reward component that trains a stated confidence, for tasks that offer one (see ``calibrated``)
    calibrated_reward: ClassVar[str | None] = None
    #: row columns copied into every predictions row (when the row has them), for anyone recomputing a figure
    prediction_columns: ClassVar[tuple[str, ...]] = ("kind",)
    #: the row column shown as "expected" beside a wrong answer
    reference_column: ClassVar[str] = "answer"
    #: whether ``build_data`` returns a steering that injects activations in every pass (checked at start-up:
    #: vLLM cannot run the hooks)
    injects_activations: ClassVar[bool] = False

    def __init__(self, config: TaskConfig, context: TaskContext):
        self.config = config
        self.context = context

    @property
    def name(self) -> str:
        return self.config.name

    @property
    def calibrated(self) -> bool:
        """Whether the reward mix trains the ``[epistemic status: NN]`` tag: then the prompt asks for it, and
        evaluation scores the stated confidence (``confidence`` in each sample's scores)."""
        return self.calibrated_reward is not None and self.calibrated_reward in self.context.reward_names

    def gives_tools(self) -> bool:
        """Whether ``build_data`` will hand the run's training tools (``TaskData.tools`` or ``row_tools``): then the
        run's settings that cannot run them are refused before the model loads."""
        return False

    def confidence_scale(self) -> list[int] | None:
        """The numbers (0-100) the task teaches its model to state in the tag, for
        ``eval.confidence_decoding=expected`` (``ao_calib.calibration.decoding``); None: the task names none, and
        that setting is refused."""
        return None

    # ------------------------------------------------------------------ the steps of a run, in order

    def requirements(self, need_adapter: bool = True) -> TaskRequirements:
        """1. Before the model loads: a pretrained adapter to start from (none is built when ``need_adapter`` is
        false: the run starts from another run's adapter, ``trainer.init_from``) and hub data sets to check."""
        return TaskRequirements()

    @abstractmethod
    def build_data(self, tokenizer, model) -> TaskData:
        """2. Train/held-out rows; ``model`` is there for tasks that need the base model's activations."""

    def warmup_data(self, stage, model, tokenizer, data: TaskData, run_dir: RunDir) -> TaskData:
        """3. The rows a warm-up stage trains on. ``warmup=sft`` trains on the task's own ``completion`` column;
        ``warmup=format`` (the model's own answers, tagged with a confidence) is for tasks that implement it."""
        if stage.name == "format":
            raise AOCalibError(f"task={self.name} has no format warm-up (warmup=format); use warmup=sft")
        return data

    def main_stage_data(self, stage, data: TaskData) -> TaskData:
        """3b. The rows the main stage (``trainer``) trains on, for a task whose RL stage trains on rows the
        warm-up must not see (or fewer of some kind); by default the same rows. Called on every process, before the
        stage starts and again when a resumed run continues it: it must be deterministic."""
        return data

    def judge_prompt(self) -> str | None:
        """The grading prompt a judge without its own ``judge.prompt`` uses; None: the task has none."""
        return None

    @abstractmethod
    def reward_functions(self, data: TaskData | None) -> dict[str, RewardFn]:
        """4. All reward components this task offers, by the name configs use; a component that calls the judge
        reads it from ``data.judge``. ``data`` is None where only the names are read (start-up checks): build
        the dict without calling anything then."""

    def revise_answers(self, model, tokenizer, rows: list[dict], answers: list[str], *, chat_template_kwargs: dict,
                       max_new_tokens: int) -> list[str]:
        """5a. Evaluation with greedy decoding: a second look at generated answers before they are scored, for a
        decision rule that needs the model's own probabilities (the function-calling task's
        ``min_no_call_probability``); by default the answers as generated. Called on every process with its share
        of the rows, with the model the answers came from, without the task's steering."""
        return answers

    @abstractmethod
    def score(self, completions: list[str], rows: list[dict], data: TaskData) -> list[dict[str, float]]:
        """5. Evaluation: every reward component (and the headline metric) of each completion of its row, ``data``
        being the data the rows came from (its judge, its state)."""

    def aggregate(self, records: list[dict], run_dir: RunDir, tag: str) -> dict[str, float]:
        """6. An evaluation's figures (the closing table's rows): the mean of every per-sample score, and, for a
        calibrated task, the calibration of the stated confidence against the headline score."""
        metrics = mean_scores(records)
        metrics["accuracy"] = metrics.get(self.headline_metric, 0.0)
        if self.calibrated and records:
            conf = [scored_confidence(r["scores"]["confidence"]) for r in records]
            figures = calibration_figures(records, conf, [r["scores"][self.headline_metric] for r in records],
                                          run_dir, tag)
            metrics.update({k: v for k, v in figures.items() if k != "accuracy"})
        return metrics

    def extra_evaluations(self, model, tokenizer, generate, run_dir: RunDir, tag: str, data: TaskData) -> dict:
        """7. Further benchmarks run with every evaluation of ``data``; ``generate(rows)`` returns greedy completions
        with the task's steering. Returns a JSON-able dict stored in eval.json under its keys. In a multi-process run
        every process calls it (``generate`` splits the rows over them and returns all completions to each), so it
        must write files and call a judge on the main process only (``ao_calib.runtime.distributed.is_main``/
        ``on_main``)."""
        return {}

    def metric_names(self) -> frozenset[str]:
        """The figures an evaluation reports (``aggregate``'s keys), which ``eval.select_metric`` is checked against
        before the model loads: the headline, every reward component's mean, a calibrated task's calibration
        figures and a steered task's variant accuracies. A task whose ``score`` or ``aggregate`` adds others
        extends it."""
        names = {"accuracy", self.headline_metric, *self.reward_functions(None)}
        if self.calibrated:
            names |= {"confidence", *calibration_figure_names()}
        if self.injects_activations:
            names |= {f"{variant}/accuracy" for variant in ("control", "none")}
        return frozenset(names)

    def summary(self, data: TaskData) -> dict:
        """8. Task totals for summary.json at the end (the framework adds the judge's calls, failures and cost)."""
        return {}

    # ------------------------------------------------------------------ outside a run

    def score_row(self, row: dict, source: str, index: int, line_no: int) -> dict:
        """``python -m ao_calib.score``: validates one row of someone's completions (raising
        ``ao_calib.core.errors.DataValidationError`` naming ``source``, the line and the field) and returns the
        fields its output row adds: ``valid`` (bool) and the reward components."""
        raise AOCalibError(f"task={self.name} does not score external completions (no score_row)")


def mean_scores(records: list[dict]) -> dict[str, float]:
    """The mean of every per-sample score over the records."""
    keys = sorted({k for r in records for k in r["scores"]})
    return {k: sum(r["scores"][k] for r in records) / max(len(records), 1) for k in keys}


def calibration_figures(records: list[dict], confidences, outcomes, run_dir: RunDir | None, tag: str
                        ) -> dict[str, float]:
    """Every per-example calibration figure (``ao_calib.calibration.metrics.calibration_report``), the headroom
    over the question kinds when records carry several, the within-question figures when they carry the
    question, and this evaluation's reliability and risk-coverage plots (when ``run_dir`` is given)."""
    from ao_calib.calibration import metrics as cm

    report = cm.calibration_report(confidences, outcomes)
    kinds = [r.get("kind") for r in records]
    if None not in kinds and len(set(kinds)) > 1:
        report.update(cm.kind_headroom(outcomes, kinds))
    questions = [r.get("question") for r in records]
    if records and None not in questions:
        # Does the confidence tell right from wrong among rows that ask the very same question, and does it
        # beat a rule that reads only the question's wording? (the shortcut a synthetic data set must not reward)
        report["auroc_within_question"] = cm.within_group_auroc(confidences, outcomes, questions)
        rule = cm.group_rate_rule(outcomes, questions)
        report["text_rule_auroc"] = cm.auroc(rule, cm.binarize(outcomes))
        report["text_rule_ece"] = cm.expected_calibration_error(rule, cm.binarize(outcomes))
        report["distinct_questions"] = len(set(questions))
    if records and run_dir is not None:
        cm.plot_reliability_diagram(confidences, outcomes, run_dir.reliability_plot(tag), title=(
            f"{tag}: acc {report['accuracy']:.3f}, AUROC {report['auroc']:.3f}, ECE {report['ece']:.3f} "
            f"(n={len(records)})"))
        cm.plot_risk_coverage(confidences, outcomes, run_dir.risk_coverage_plot(tag), title=(
            f"{tag}: AURC {report['aurc']:.3f}, selective acc@50% {report['selective_accuracy@50']:.3f}"))
    return report


def calibration_figure_names() -> list[str]:
    """The names ``calibration_figures`` gives its figures (those of the question kinds aside, named by kind), read
    off a call on four made-up records that carry a kind and a question."""
    records = [{"scores": {}, "kind": kind, "question": question} for kind, question in
               (("a", "p"), ("a", "q"), ("b", "p"), ("b", "q"))]
    figures = calibration_figures(records, [0.2, 0.4, 0.6, 0.8], [0.0, 1.0, 0.0, 1.0], None, "names")
    return sorted(name for name in figures if not name.startswith("accuracy_kind/"))


def build_task(cfg) -> Task:
    """The task ``cfg.task._target_`` names, built from its own typed settings and the run's context (the
    composed config converted once, here)."""
    from omegaconf import OmegaConf

    cls = plugin_class("task", cfg.task.get("_target_"))
    if cls is None:
        raise AOCalibError(f"task={cfg.task.name} names no class: set task._target_ (e.g. my_pkg.task.MyTask)")
    if not (isinstance(cls, type) and issubclass(cls, Task)):
        raise AOCalibError(f"task._target_={cfg.task._target_} is not a subclass of ao_calib.task_api.Task")
    return cls(OmegaConf.to_object(cfg.task), TaskContext.of(cfg))


def with_run_judge(task: Task, data: TaskData, model, tokenizer, judge=None) -> TaskData:
    """``data`` carrying the run's judge: ``judge`` when given (one judge for every split's data), else the one
    ``judge=...`` names, built now with the task's grading prompt (judge=local grades with ``model``)."""
    if judge is None and task.context.judge is not None:
        from ao_calib.judges import JudgeContext, build_judge

        judge = build_judge(task.context.judge, JudgeContext(
            model=model, tokenizer=tokenizer, chat_template_kwargs=dict(task.context.model.chat_template_kwargs),
            default_prompt=task.judge_prompt()))
    return data.with_judge(judge)


def run_totals(task: Task, data: TaskData) -> dict:
    """The task's totals and its judge's (calls, failures, cost) for summary.json."""
    return {**task.summary(data), **({"judge": data.judge.totals()} if data.judge is not None else {})}


# The steps the framework hands the run's data (its judge, its state) as `data`.
DATA_STEPS = ("reward_functions", "score", "extra_evaluations", "summary")


def check_task_class(cfg) -> None:
    """Refuses, before any model loads, a task class written for the API before the data was passed to its
    steps, naming each step."""
    cls = plugin_class("task", cfg.task.get("_target_"))
    if not (isinstance(cls, type) and issubclass(cls, Task)):
        return  # build_task names what is wrong with it
    old = [name for name in DATA_STEPS if "data" not in inspect.signature(getattr(cls, name)).parameters]
    if old:
        raise AOCalibError(f"task class {cls.__module__}.{cls.__qualname__}: {', '.join(old)} must take the run's data "
                           "as `data` (a TaskData; its judge and state), e.g. `def reward_functions(self, data)`, "
                           "`def score(self, completions, rows, data)` (docs/tasks.md)")
