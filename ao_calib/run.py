"""``python -m ao_calib.run``: compose the config, then train, evaluate and record one run.

Heavy libraries are imported inside ``train`` so ``--help`` and config composition stay fast.
"""

from __future__ import annotations

import dataclasses
import functools
import logging
import os
import sys
import warnings
from typing import Any

import hydra
from hydra.core.hydra_config import HydraConfig
from omegaconf import DictConfig, OmegaConf

from ao_calib.config import help_text as cli_help  # registers the resolver --help lists groups with; --help <key>
from ao_calib.config.checks import check_combinations, eval_max_new_tokens, eval_token_budget, run_stages
from ao_calib.config.command_line import check_command_line
from ao_calib.config.compose import (CONF_DIR, check_values, refuse_moved_overrides, register_schemas, typed,
                                     unknown_keys, validate_plugins)
from ao_calib.config.override_errors import unknown_keys_error
from ao_calib.config.search import check_objective_name, check_search, returned_value, searching
from ao_calib.config.short_run import short_run_alert
from ao_calib.core import command_names
from ao_calib.core.errors import AOCalibError
from ao_calib.core.io import atomic_write_text
from ao_calib.evaluation.config import EvalConfig
from ao_calib.models.config import ModelConfig
from ao_calib.preflight.references import references_over_budget
from ao_calib.preflight.resources import check_recipe_choices
from ao_calib.runs.checkpoints import StartPoint, start_point
from ao_calib.runs.run_dir import WARMUP, RunDir, read_json
from ao_calib.runtime import distributed, sharding
from ao_calib.runtime.interrupts import RunInterrupted, SignalWatch
from ao_calib.runtime.offline import keep_offline, private_temp_dir
from ao_calib.trainers.config import TrainerConfig
from ao_calib.trainers.stage import RunStopped  # noqa: F401 -- raised by a stage; named here, where runs end

log = logging.getLogger("ao_calib")
# transformers 5 renamed gradient checkpointing; TRL 1.16 still sets the old name on every config and model.
warnings.filterwarnings("ignore", message=r".*gradient_checkpointing.* is deprecated", category=FutureWarning)


@dataclasses.dataclass
class RunSettings:
    """The settings the pipeline's parts are built from, converted once from the composed config."""

    model: ModelConfig
    eval: EvalConfig
    stages: list[tuple[str, TrainerConfig]]  # the warm-up (when the run has one), then the trainer ("train")
    eval_max_new_tokens: int  # eval.max_new_tokens, else the trainer's max_completion_length

    @classmethod
    def of(cls, cfg: DictConfig) -> RunSettings:
        return cls(typed(cfg.model, ModelConfig), typed(cfg.eval, EvalConfig),
                   [(name, typed(node, OmegaConf.get_type(node))) for name, node in run_stages(cfg)],
                   eval_max_new_tokens(cfg))

    @property
    def trainer(self) -> TrainerConfig:
        return self.stages[-1][1]


def train(cfg: DictConfig, run_dir: RunDir, start: StartPoint | None = None) -> dict:
    """The pipeline, one step per line. Returns the run summary. ``start``: from scratch, or where a resumed run
    picks up (its logs cut back to the checkpoint's step, its finished stages not repeated)."""
    from transformers import set_seed

    from ao_calib.monitoring import wandb as run_wandb
    from ao_calib.reporting import summary as run_summary
    from ao_calib.trainers.stage import StageRun, StageStart, plan_stages, run_stage

    start, settings = start or StartPoint(), RunSettings.of(cfg)
    summary = run_summary.RunSummary(run_dir, resumed_from=start.checkpoint)
    summary.wandb_run_id = (summary.previous() or {}).get("wandb_run_id") if start.resuming else None  # kept on a kill
    watch = SignalWatch().install()
    try:
        _cut_logs_back(start, run_dir)
        summary.write("running")
        set_seed(settings.trainer.seed)  # LoRA initialisation and data sampling happen before any trainer seeds itself
        too_short = short_run_alert(cfg)  # said before the model loads: a smoke run is told it will learn nothing
        parts = _build_parts(cfg, settings, run_dir, summary)
        if distributed.is_main():
            summary.wandb_run_id = run_wandb.init_wandb(cfg, run_dir, run_id=summary.wandb_run_id)
        summary.write("running")  # with the wandb run id, which a resume after a kill continues
        setup = parts.trainer_setup(settings, run_dir, wandb_run_id=summary.wandb_run_id)
        evaluate_as, evaluate_final = parts.evaluations(settings, run_dir)
        if settings.eval.enabled and settings.eval.initial and not _done_before(start, run_dir, "initial"):
            evaluate_as(tag="initial")
        stage_run = StageRun(setup, parts.task, settings.eval, cfg.alerts, run_dir, watch, evaluate_as, evaluate_final)
        alerts: dict[str, dict] = {**too_short, **parts.over_budget}  # the start-up checks'; each stage adds its own
        for plan in plan_stages(settings.stages, start):
            if plan.start == StageStart.skip:
                log.info("resuming: the %s stage finished before checkpoint %s; not repeated", plan.name,
                         plan.checkpoint)
                continue
            result = run_stage(plan, stage_run)
            alerts.update(result.alerts)
        result.trainer.save_model(str(run_dir.adapter))  # every process takes part (a sharded model is gathered)
        if distributed.is_main():
            parts.tokenizer.save_pretrained(str(run_dir.adapter))
        eval_metrics = evaluate_final() if settings.eval.enabled else {}
        if eval_metrics and distributed.is_main():
            _check_calibration_regression(cfg, run_dir, result.trainer.state.global_step)
        from ao_calib.task_api import run_totals

        final = summary.write("completed", final_metrics=result.last_row, eval_metrics=eval_metrics,
                              extra={"alerts": {**alerts, **run_dir.fired_alerts()},
                                     **run_totals(parts.task, parts.data),
                                     **({"selection": _selections(cfg, run_dir)} if parts.selecting else {}),
                                     **({"prompts_over_limit": parts.prompts_over} if parts.prompts_over else {})})
    except (RunInterrupted, KeyboardInterrupt) as exc:
        signal_name = getattr(exc, "signal_name", "SIGINT")
        _record(summary, "interrupted", signal=signal_name, error=str(exc) or f"interrupted by {signal_name}")
        if isinstance(exc, RunInterrupted):
            exc.watch = watch  # main hands the signal over to a launcher's own handler once the run is recorded
        raise
    except BaseException as exc:
        _record(summary, "failed", error=f"{type(exc).__name__}: {exc}")
        raise
    finally:
        run_wandb.finish_wandb()
        if watch.received is None:
            watch.uninstall()
    if distributed.is_main():
        run_summary.print_final_screen(final, settings.eval.closing_table)
    return final


def _done_before(start: StartPoint, run_dir: RunDir, tag: str) -> bool:
    """Whether a resumed run's evaluation ``tag`` finished before it was stopped (it is not repeated)."""
    return start.resuming and run_dir.eval_report(tag).is_file()


def _cut_logs_back(start: StartPoint, run_dir: RunDir) -> None:
    """A resumed run's logs lose the rows written after its checkpoint's step (the main process's job)."""
    if start.resuming and distributed.is_main():
        dropped = run_dir.cut_logs(start.step, start.stage)
        log.info("resuming the %s stage at step %s: dropped rows logged after it %s", start.stage, start.step or 0,
                 dropped)


@dataclasses.dataclass
class RunParts:
    """What the stages and evaluations of a run share: the task, the model and the prepared data."""

    task: Any
    final_task: Any  # the task of the final evaluation: under selection, one that scores the test split
    tokenizer: Any
    model: Any
    data: Any
    final_data: Any
    reward_fns: dict
    schedule: Any
    prompts_over: dict  # prompts over the trainer's max_prompt_length, by split
    over_budget: dict  # the alerts of references longer than their generation budget

    @property
    def selecting(self) -> bool:
        return self.final_task is not self.task

    def trainer_setup(self, settings: RunSettings, run_dir: RunDir, wandb_run_id: str | None):
        from ao_calib.trainers import TrainerSetup

        report_to_wandb = distributed.is_main() and wandb_run_id is not None  # the main process logs to wandb
        return TrainerSetup(settings.model, self.model, self.tokenizer, self.data, run_dir, self.schedule,
                            self.reward_fns, report_to_wandb=report_to_wandb, seed=settings.trainer.seed)

    def evaluations(self, settings: RunSettings, run_dir: RunDir):
        """(the evaluation on the split the run selects on, the final one: on the test split under selection)."""
        from ao_calib.evaluation.evaluate import evaluate

        kwargs = _eval_kwargs(settings, run_dir)
        evaluate_as = functools.partial(evaluate, self.task, self.model, self.tokenizer, self.data, **kwargs)
        if not self.selecting:
            return evaluate_as, evaluate_as
        return evaluate_as, functools.partial(evaluate, self.final_task, self.model, self.tokenizer,
                                              self.final_data, **kwargs)


def _build_parts(cfg: DictConfig, settings: RunSettings, run_dir: RunDir, summary) -> RunParts:
    """The task, the model (its adapter attached, sharded under FSDP2) and the data, each refused as early as it
    can be: a selection metric and the numbers' plan before the model loads."""
    from ao_calib.calibration.decoding import expected_number_plan
    from ao_calib.evaluation.selection import check_metric_name, on_split
    from ao_calib.models import loading as models
    from ao_calib.preflight.prompts import guard_prompts
    from ao_calib.preflight.resources import check_resources
    from ao_calib.rewards import build_reward_schedule
    from ao_calib.task_api import build_task, with_run_judge
    from ao_calib.trainers.common import uses_bf16

    trainer, model_settings = settings.trainer, settings.model
    task = final_task = build_task(cfg)
    if searching():  # the figure an optimising sweep reads, refused before the model loads (a task's names may
        check_objective_name(cfg.search.objective, task)  # need its judge, which judge=local builds with the model)
    if settings.eval.enabled and settings.eval.select_metric is not None:
        check_metric_name(settings.eval.select_metric, task)  # refused before the model loads
        final_task = build_task(on_split(cfg, "test"))
    if task.gives_tools():
        from ao_calib.tools import stage_clashes

        if clashes := stage_clashes(trainer):
            raise AOCalibError(f"task={task.name} runs tools inside its episodes, which do not combine with "
                               + ", ".join(clashes))
    # What is built on disk (a stand-in adapter, a tiny model) is built once, by the main process.
    needs = distributed.on_main(lambda: task.requirements(need_adapter=not trainer.init_from))
    adapter = (distributed.on_main(lambda: models.resolve_init_adapter(trainer.init_from, model_settings))
               if trainer.init_from else needs.adapter)
    check_resources(cfg, needs.hub_datasets, adapter)
    source = distributed.on_main(lambda: models.model_source(model_settings, cfg.paths.cache_dir))
    tokenizer = models.load_tokenizer(source, model_settings)
    expected_number_plan(task, tokenizer, settings.eval.confidence_decoding)  # refused before the model loads
    model = models.attach_lora(models.load_base_model(model_settings, source), model_settings, trainer.lora, adapter)
    # Sharded now, under FSDP2, so that extraction, every evaluation and both stages use one sharded model.
    model = sharding.prepare(model, uses_bf16(model_settings))
    summary.model = models.describe(model, model_settings, source)
    guarded = functools.partial(guard_prompts, tokenizer=tokenizer, limit=getattr(trainer, "max_prompt_length", None),
                                policy=getattr(trainer, "prompt_length_policy", None),
                                chat_template_kwargs=model_settings.chat_template_kwargs)
    data, prompts_over = guarded(task.build_data(tokenizer, model))
    data = with_run_judge(task, data, model, tokenizer)
    final_data = data
    if final_task is not task:  # the test split, scored once at the end, on the chosen adapter, by the same judge
        final_data, final_over = guarded(final_task.build_data(tokenizer, model))
        final_data = with_run_judge(final_task, final_data, model, tokenizer, judge=data.judge)
        prompts_over = {**prompts_over, **({"final_test": final_over["test"]} if "test" in final_over else {})}
    over_budget = references_over_budget(data, tokenizer, _generation_budgets(cfg))
    reward_fns = task.reward_functions(data) if trainer.name != "sft" else {}
    schedule = build_reward_schedule(cfg.reward, reward_fns) if reward_fns else None
    return RunParts(task, final_task, tokenizer, model, data, final_data, reward_fns, schedule, prompts_over,
                    over_budget)


def _selections(cfg: DictConfig, run_dir: RunDir) -> dict[str, dict]:
    """Each stage's recorded choice (a stage finished before a resume included), for summary.json."""
    found = {}
    for stage_name, _ in run_stages(cfg):
        record = read_json(run_dir.selection(stage_name)) or {}
        if record.get("selected"):
            found[stage_name] = record
    return found


def _check_calibration_regression(cfg: DictConfig, run_dir: RunDir, step: int) -> None:
    """Records the end-of-run alert ``calibration_regressed`` (ao_calib.monitoring.end_of_run) once per run, resumes
    included, when the run evaluated its warm-up and the main stage's confidence is worse on the same rows."""
    from ao_calib.monitoring.callback import record_alert
    from ao_calib.monitoring.end_of_run import calibration_regression

    before, after = run_dir.eval_report(WARMUP), run_dir.eval_report()
    if not (before.is_file() and after.is_file()) or "calibration_regressed" in run_dir.fired_alerts():
        return
    message = calibration_regression((read_json(before) or {}).get("metrics") or {},
                                     (read_json(after) or {}).get("metrics") or {}, cfg.alerts, str(run_dir.path))
    if message:
        record_alert(run_dir.alerts, step, "calibration_regressed", message)
        log.warning("ALERT at the end of the run: %s", message)


def _record(summary, status: str, **fields) -> None:
    """The final status, when the disk still takes it: a run that cannot write it (a full disk) stays "running"
    with its process id, which ``ao_calib.report`` shows as "crashed" once the process is gone."""
    try:
        summary.write(status, **fields)
    except OSError as exc:
        log.error("could not record status %r in %s (%s)", status, summary.run_dir.summary, exc)


def _generation_budgets(cfg: DictConfig) -> dict[str, tuple[str, int | None]]:
    """The key and token budget each split's answers are generated under: the held-out split by the evaluation,
    the training split by the main stage's rollouts (none for SFT, which samples nothing)."""
    eval_key, eval_budget = eval_token_budget(cfg)
    return {"test": (eval_key, eval_budget if cfg.eval.enabled else None),
            "train": ("trainer.max_completion_length", cfg.trainer.get("max_completion_length"))}


def _eval_kwargs(settings: RunSettings, run_dir: RunDir) -> dict:
    evaluation = settings.eval
    return {
        "num_samples": evaluation.num_samples,
        "batch_size": evaluation.batch_size,
        "max_new_tokens": settings.eval_max_new_tokens,
        "chat_template_kwargs": settings.model.chat_template_kwargs,
        "run_dir": run_dir,
        "mismatches_printed": evaluation.mismatches_printed,
        "temperature": evaluation.temperature,
        "seed": evaluation.seed,
        "merged_copy": evaluation.merged_copy,
        "turn_cache_mb": evaluation.turn_cache_mb,
        "confidence_decoding": evaluation.confidence_decoding,
    }


def _requeued() -> str | None:
    """"latest" in a SLURM job that was requeued (after preemption or a timeout, by submitit): it continues from
    its newest checkpoint in its own run directory instead of being refused as a fresh run into a used one."""
    return "latest" if int(os.environ.get("SLURM_RESTART_COUNT") or 0) > 0 else None


def _decide_start(cfg: DictConfig, run_dir: RunDir) -> StartPoint:
    start = start_point(cfg.trainer.resume_from_checkpoint or _requeued(), run_dir, cfg.trainer.max_steps)
    run_dir.clear_rank_failures()  # another process's error from an earlier attempt is not this one's
    return start


def write_full_config(cfg: DictConfig, run_dir: RunDir) -> None:
    """The full config, every default included, beside Hydra's composed one: what the run really used."""
    atomic_write_text(run_dir / RunDir.CONFIG, OmegaConf.to_yaml(cfg))


def check_config(cfg: DictConfig) -> None:
    """Every check a run makes on its config before it starts: the same for a run, ``--cfg job`` and a sweep's job."""
    check_recipe_choices()  # first: a group choice the recipe merged over would show up as a stranger error
    validate_plugins(cfg)
    from ao_calib.task_api import check_task_class

    check_task_class(cfg)
    extra = unknown_keys(cfg)
    if extra:
        raise unknown_keys_error(extra)
    check_values(cfg)
    check_combinations(cfg)
    if distributed.is_distributed():  # torch: only where there are processes to split the batches over
        from ao_calib.trainers.common import check_process_split

        check_process_split(cfg)
    sharding.check_stages(cfg)


@hydra.main(version_base="1.3", config_path=str(CONF_DIR), config_name="config")  # package or clone
def main(cfg: DictConfig) -> float | None:
    run_dir = RunDir(HydraConfig.get().runtime.output_dir)
    distributed.export_submitit_environment()
    distributed.log_to_own_file(run_dir)
    try:
        check_config(cfg)  # again: a sweep's job is checked here, with its own values
        check_search(cfg, HydraConfig.get())  # also made as Hydra starts (SearchOnValidation), before any directory
        # The main process decides (another one would find the main's first files and call the directory used).
        start = distributed.on_main(lambda: _decide_start(cfg, run_dir))
        if start.finished is not None:
            if not distributed.is_main():
                return None
            print(f"{run_dir}: this run already completed step {start.finished['final_metrics']['step']} "
                  f"(trainer.max_steps={cfg.trainer.max_steps}); nothing to resume. Raise trainer.max_steps to "
                  "train further.", flush=True)
            return returned_value(start.finished, cfg.search.objective)
        keep_offline(cfg)  # before any model library loads: no lookup of a host the run does not need
        private_temp_dir()
        if distributed.is_main():
            write_full_config(cfg, run_dir)
        summary = train(cfg, run_dir, start)
    except AOCalibError as exc:
        log.error("%s", exc)
        if distributed.is_main():
            print(f"error: {exc}", file=sys.stderr, flush=True)
        raise SystemExit(2) from None
    except (RunInterrupted, KeyboardInterrupt) as exc:
        signal_name = getattr(exc, "signal_name", "SIGINT")
        if distributed.is_main():
            command = ("<the same launcher> -m ao_calib.run" if distributed.is_distributed()
                       else command_names.command("run"))
            print(f"\n{exc or 'interrupted by ' + signal_name}. Resume with: {command} <same overrides> "
                  f"trainer.resume_from_checkpoint=latest hydra.run.dir={run_dir}", file=sys.stderr, flush=True)
        if getattr(exc, "watch", None) is not None:
            exc.watch.hand_over()
        raise SystemExit(getattr(exc, "exit_code", 130)) from None
    finally:
        distributed.shutdown()
    # The value an optimising sweeper (hparams_search) optimises: a validation figure there (check_search)
    return returned_value(summary, cfg.search.objective)


def cli() -> None:
    """``python -m ao_calib.run``: the schemas the config files build on are registered (the installed plug-ins'
    included; a broken plug-in stops here with its own error), the command line's config is composed and checked
    (``check_command_line``, ``check_config``), then Hydra composes it again and ``main`` runs."""
    topic = cli_help.help_topic(sys.argv[1:])
    try:
        register_schemas()
        refuse_moved_overrides(sys.argv[1:])  # before Hydra, which would call an old key unknown
        if topic is None:  # checked before Hydra makes the run directory: a refused run leaves none
            check_command_line(sys.argv[1:], check_config)
    except AOCalibError as exc:
        if distributed.is_main():
            print(f"error: {exc}", file=sys.stderr, flush=True)
        raise SystemExit(2) from None
    if topic is not None:  # `--help trainer.lr`: Hydra would read the key as a malformed override
        raise SystemExit(cli_help.print_topic_help(topic))
    main()


if __name__ == "__main__":
    cli()
