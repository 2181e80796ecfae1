"""A run's training stages (the warm-up, then the trainer, on one adapter): planned once from where the run starts
(``plan_stages``: each stage skipped, loaded, resumed or trained fresh), then each built, trained and evaluated
(``run_stage``), which returns what the stage ended with."""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from enum import Enum
from typing import Any

from ao_calib.core.errors import AOCalibError
from ao_calib.evaluation.config import EvalConfig
from ao_calib.runs.checkpoints import StartPoint
from ao_calib.runs.run_dir import RunDir
from ao_calib.runtime.interrupts import RunInterrupted, SignalWatch
from ao_calib.trainers.config import TrainerConfig

log = logging.getLogger("ao_calib")

MAIN = "train"  # the main stage's name (``trainer``); a warm-up is named after its key


class RunStopped(AOCalibError):
    """A monitor stopped the run (e.g. the judge has been down for too many steps)."""


class StageStart(str, Enum):
    skip = "skip"  # a resumed run's warm-up that finished before the main stage's checkpoint
    load = "load"  # the checkpoint is the stage's last step: loaded, not trained (it had finished)
    resume = "resume"  # trained on from the checkpoint
    fresh = "fresh"  # trained from its first step


@dataclass(frozen=True)
class StagePlan:
    name: str  # MAIN, or the warm-up's key
    settings: TrainerConfig
    start: StageStart = StageStart.fresh
    checkpoint: str | None = None  # the checkpoint a resumed or loaded stage takes up
    step: int | None = None  # that checkpoint's step

    @property
    def is_main(self) -> bool:
        return self.name == MAIN


def plan_stages(stages: list[tuple[str, TrainerConfig]], start: StartPoint) -> list[StagePlan]:
    """How each stage starts: the resumed stage from its checkpoint (loaded when that is its last step), the stages
    before it skipped, those after it fresh."""
    plans = []
    for name, settings in stages:
        if name != MAIN and start.checkpoint is not None and start.stage == MAIN:
            plans.append(StagePlan(name, settings, StageStart.skip, start.checkpoint))
        elif name == start.stage and start.checkpoint is not None:
            finished = start.step is not None and start.step >= settings.max_steps
            plans.append(StagePlan(name, settings, StageStart.load if finished else StageStart.resume,
                                   start.checkpoint, start.step))
        else:
            plans.append(StagePlan(name, settings))
    return plans


@dataclass
class StageResult:
    trainer: Any  # the stage's transformers Trainer, its model holding the stage's (or the chosen step's) adapter
    last_row: dict  # the stage's last metrics.jsonl row
    alerts: dict[str, dict] = field(default_factory=dict)  # the alerts its monitors fired


@dataclass
class StageRun:
    """What every stage of a run is trained and evaluated with."""

    setup: Any  # ao_calib.trainers.TrainerSetup
    task: Any  # ao_calib.task_api.Task
    eval: EvalConfig
    alerts: Any  # the run's ``alerts`` settings
    run_dir: RunDir
    watch: SignalWatch
    evaluate: Callable[..., dict]  # an evaluation on the held-out split the run selects on (tag=..., num_samples=...)
    evaluate_final: Callable[..., dict]  # the evaluation a stage's end is reported on (the test split)


def run_stage(plan: StagePlan, run: StageRun) -> StageResult:
    """Builds the stage's trainer, trains it (or loads its finished checkpoint), chooses its adapter under
    checkpoint selection and evaluates a warm-up; a signal or a monitor's stop ends the run here."""
    from ao_calib.trainers import build_trainer
    from ao_calib.trainers.callbacks import MetricsFileCallback, StopOnSignalCallback

    alerts, outage = monitoring_callbacks(run.alerts, plan.settings, run.run_dir)
    metrics = MetricsFileCallback(run.run_dir.metrics, stage=plan.name)
    data = (run.task.main_stage_data(plan.settings, run.setup.data) if plan.is_main
            else run.task.warmup_data(plan.settings, run.setup.model, run.setup.tokenizer, run.setup.data,
                                      run.run_dir))
    setup = run.setup if data is run.setup.data else dataclasses.replace(run.setup, data=data)
    monitors = [m for m in (alerts, outage) if m is not None]
    trainer = build_trainer(setup, plan.settings, plan.name, [*monitors, StopOnSignalCallback(run.watch)],
                            metrics_file=metrics)
    selection = _periodic_evaluation(plan, run, trainer)
    _train_or_load(plan, trainer, run, metrics)
    fired = {name: info for monitor in monitors for name, info in monitor.fired.items()}
    if run.watch.received:
        raise RunInterrupted(run.watch.received, f"checkpoint saved at step {trainer.state.global_step}")
    if outage is not None and outage.stop_reason:
        raise RunStopped(outage.stop_reason)
    if selection is not None:
        step = plan.step if plan.start == StageStart.load else trainer.state.global_step
        select_at_stage_end(selection, trainer, _during_training(plan, run), step)
    if not plan.is_main and run.eval.enabled and run.eval.after_warmup:
        if plan.start == StageStart.load and run.run_dir.eval_report(plan.name).is_file():
            log.info("resuming: the %s stage's evaluation finished before; not repeated", plan.name)
        else:
            run.evaluate_final(tag=plan.name)
    return StageResult(trainer, metrics.last, fired)


def _train_or_load(plan: StagePlan, trainer, run: StageRun, metrics) -> None:
    run.watch.training = True
    try:
        if plan.start == StageStart.load:
            # Killed after the stage's last step (during its evaluation, or before the next stage saved a
            # checkpoint): transformers would train one step past max_steps when resumed there, so the checkpoint
            # is only loaded.
            load_checkpoint(trainer, plan.checkpoint)
            metrics.last.update(last_metrics_row(run.run_dir, plan.name))
        else:
            resume = plan.checkpoint if plan.start == StageStart.resume else None
            if resume:
                load_own_state(trainer, resume)
            trainer.train(resume_from_checkpoint=resume)
    finally:
        run.watch.training = False


def load_checkpoint(trainer, checkpoint: str) -> None:
    """A checkpoint's weights (the adapter; PPO's value head) into the trainer's model, without training on:
    transformers has no public call for it, so its private ``Trainer._load_from_checkpoint`` lives here only."""
    trainer._load_from_checkpoint(checkpoint)
    load_own_state(trainer, checkpoint)


def load_own_state(trainer, checkpoint: str) -> None:
    """What a trainer of the project saves beside transformers' checkpoint (PPO's critic), by its public
    ``load_own_state``; transformers' ``train(resume_from_checkpoint=...)`` restores the rest."""
    own = getattr(trainer, "load_own_state", None)
    if own is not None:
        own(checkpoint)


def _during_training(plan: StagePlan, run: StageRun) -> Callable[[str], dict]:
    """The evaluation during a stage: a warm-up's are tagged with its name, so they never overwrite the main
    stage's."""
    prefix = "" if plan.is_main else f"{plan.name}_"
    return lambda tag: run.evaluate(tag=prefix + tag, num_samples=run.eval.during_num_samples)


def _periodic_evaluation(plan: StagePlan, run: StageRun, trainer):
    """The stage's evaluations every ``eval.every_steps`` (added to ``trainer``), and its checkpoint selection
    (returned; None without ``eval.select_metric``)."""
    from ao_calib.evaluation.selection import StageSelection
    from ao_calib.trainers.callbacks import PeriodicEvalCallback

    settings = run.eval
    if not (settings.enabled and settings.every_steps and (plan.is_main or settings.during_warmup)):
        return None
    selection = None
    if settings.select_metric is not None:
        selection = StageSelection(run.run_dir, plan.name, settings.select_metric, settings.select_mode)
        selection.take_up(plan.step if plan.start in (StageStart.resume, StageStart.load) else None)
    trainer.add_callback(PeriodicEvalCallback(_during_training(plan, run), settings.every_steps, trainer,
                                              on_result=_candidate_offer(selection)))
    return selection


def _candidate_offer(selection):
    """What the periodic evaluation calls with each result under checkpoint selection: the step becomes a
    candidate, its adapter saved when it is the best so far; None without selection."""
    if selection is None:
        return None

    def offer(step: int, tag: str, metrics: dict, trainer) -> None:
        selection.offer(step, tag, metrics, save_adapter=lambda path: trainer.save_model(str(path)))

    return offer


def select_at_stage_end(selection, trainer, evaluate_fn: Callable[[str], dict], step: int) -> None:
    """The stage's last step is evaluated on the validation split too (unless a resumed run did it already), then
    the chosen step's adapter is loaded into the model: what the next stage and the final evaluation start from."""
    from ao_calib.trainers.callbacks import validation_row

    if not selection.has(step):
        trainer.state.global_step = step  # a stage only loaded (it had finished) has not counted its steps
        tag = f"step{step}"
        metrics = evaluate_fn(tag)
        trainer.log(validation_row(metrics))
        selection.offer(step, tag, metrics, save_adapter=lambda path: trainer.save_model(str(path)))
    record = selection.choose(step)
    if record["adapter"]:
        load_checkpoint(trainer, record["adapter"])
    chosen = record["selected"]
    log.info("selection (%s): step %s chosen by %s (%s) = %s, of %d candidates", selection.stage, chosen["step"],
             record["metric"], record["mode"], chosen["value"], len(record["candidates"]))


def monitoring_callbacks(alerts, settings: TrainerConfig, run_dir: RunDir) -> tuple[Any, Any]:
    """(the failure-mode alerts, the judge-outage stop) of a stage that samples its own completions; (None, None)
    for SFT."""
    if settings.name == "sft":
        return None, None
    from ao_calib.monitoring.callback import AlertCallback, JudgeOutageCallback, training_alerts
    from ao_calib.monitoring.end_of_run import calibration_alerts

    return (AlertCallback([*training_alerts(alerts), *calibration_alerts(alerts)], alerts.patience,
                          record_to=run_dir.alerts),
            JudgeOutageCallback(alerts.judge_outage_stop_after, record_to=run_dir.alerts))


def last_metrics_row(run_dir: RunDir, stage: str = MAIN) -> dict:
    from ao_calib.runs.records import read_metrics

    rows = [r for r in read_metrics(run_dir) if r.get("stage", MAIN) == stage]
    return rows[-1] if rows else {}
