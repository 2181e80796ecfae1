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

import hydra
from hydra.core.hydra_config import HydraConfig
from omegaconf import DictConfig, OmegaConf

from ao_calib.config import (
    help_text as cli_help,  # registers the resolver --help lists groups with; answers --help <key>
)
from ao_calib.config.checks import check_combinations, eval_max_new_tokens, eval_token_budget, run_stages
from ao_calib.config.compose import check_values, register_schemas, unknown_keys, validate_plugins
from ao_calib.core.errors import AOCalibError
from ao_calib.core.io import atomic_write_text
from ao_calib.preflight.references import references_over_budget
from ao_calib.preflight.resources import check_recipe_choices
from ao_calib.runs.checkpoints import StartPoint, start_point
from ao_calib.runs.run_dir import WARMUP, RunDir, read_json
from ao_calib.runtime import distributed, sharding
from ao_calib.runtime.interrupts import RunInterrupted, SignalWatch
from ao_calib.runtime.offline import keep_offline, private_temp_dir

log = logging.getLogger("ao_calib")
# transformers 5 renamed gradient checkpointing; TRL 1.16 still sets the old name on every config and model.
warnings.filterwarnings("ignore", message=r".*gradient_checkpointing.* is deprecated", category=FutureWarning)


def train(cfg: DictConfig, run_dir: RunDir, start: StartPoint | None = None) -> dict:
    """The pipeline, one step per line. Returns the run summary. ``start``: from scratch, or where a resumed run
    picks up (its logs cut back to the checkpoint's step, its finished stages not repeated)."""
    from transformers import set_seed

    from ao_calib.calibration.decoding import expected_number_plan
    from ao_calib.evaluation import evaluate
    from ao_calib.evaluation.selection import StageSelection, check_metric_name, on_split
    from ao_calib.models import loading as models
    from ao_calib.preflight.prompts import guard_prompts
    from ao_calib.preflight.resources import check_resources
    from ao_calib.reporting import summary as run_summary
    from ao_calib.reporting import wandb as run_wandb
    from ao_calib.rewards import build_reward_schedule
    from ao_calib.task_api import build_task
    from ao_calib.trainers import TrainerSetup, build_trainer
    from ao_calib.trainers.callbacks import PeriodicEvalCallback, StopOnSignalCallback
    from ao_calib.trainers.common import uses_bf16

    start = start or StartPoint()
    summary = run_summary.RunSummary(run_dir, resumed_from=start.checkpoint)
    previous = summary.previous() or {} if start.resuming else {}
    watch = SignalWatch().install()
    try:
        if start.resuming and distributed.is_main():
            dropped = run_dir.cut_logs(start.step, start.stage)
            log.info("resuming the %s stage at step %s: dropped rows logged after it %s", start.stage,
                     start.step or 0, dropped)
        summary.write("running")
        set_seed(cfg.trainer.seed)  # LoRA initialisation and data sampling happen before any trainer seeds itself
        task = build_task(cfg)
        selecting = cfg.eval.enabled and cfg.eval.select_metric is not None
        final_task = task  # the task of the final evaluation: under selection, one that scores the test split
        if selecting:
            check_metric_name(cfg.eval.select_metric, task)  # refused before the model loads
            final_task = build_task(on_split(cfg, "test"))
        # What is built on disk (a stand-in adapter, a tiny model) is built once, by the main process.
        needs = distributed.on_main(lambda: task.requirements(need_adapter=not cfg.trainer.init_from))
        adapter = (distributed.on_main(lambda: models.resolve_init_adapter(cfg.trainer.init_from, cfg.model))
                   if cfg.trainer.init_from else needs.adapter)
        check_resources(cfg, needs.hub_datasets, adapter)
        source = distributed.on_main(lambda: models.model_source(cfg.model, cfg.paths.cache_dir))
        tokenizer = models.load_tokenizer(source, cfg.model)
        expected_number_plan(task, tokenizer, cfg.eval.confidence_decoding)  # refused before the model loads
        model = models.attach_lora(models.load_base_model(cfg.model, source), cfg.model, cfg.trainer.lora, adapter)
        # Sharded now, under FSDP2, so that extraction, every evaluation and both stages use one sharded model.
        model = sharding.prepare(model, uses_bf16(cfg.model))
        summary.model = models.describe(model, cfg.model, source)
        guarded = functools.partial(guard_prompts, tokenizer=tokenizer, limit=cfg.trainer.get("max_prompt_length"),
                                    policy=cfg.trainer.get("prompt_length_policy"),
                                    chat_template_kwargs=OmegaConf.to_container(cfg.model.chat_template_kwargs,
                                                                                resolve=True))
        data, prompts_over = guarded(task.build_data(tokenizer, model))
        final_data = data
        if selecting:  # the test split, scored once at the end, on the chosen adapter
            final_data, final_over = guarded(final_task.build_data(tokenizer, model))
            prompts_over = {**prompts_over, **({"final_test": final_over["test"]} if "test" in final_over else {})}
        over_budget = references_over_budget(data, tokenizer, _generation_budgets(cfg))
        reward_fns = task.reward_functions() if cfg.trainer.name != "sft" else {}
        schedule = build_reward_schedule(cfg.reward, reward_fns) if reward_fns else None
        if distributed.is_main():
            summary.wandb_run_id = run_wandb.init_wandb(cfg, run_dir, run_id=previous.get("wandb_run_id"))
        summary.write("running")  # with the wandb run id, which a resume after a kill continues
        setup = TrainerSetup(cfg.model, model, tokenizer, data, run_dir, schedule, reward_fns,
                             report_to_wandb=summary.wandb_run_id is not None, seed=cfg.trainer.seed)
        evaluate_as = functools.partial(evaluate, task, model, tokenizer, data, **_eval_kwargs(cfg, run_dir))
        evaluate_final = (functools.partial(evaluate, final_task, model, tokenizer, final_data,
                                            **_eval_kwargs(cfg, run_dir)) if selecting else evaluate_as)
        initial_done = start.resuming and run_dir.eval_report("initial").is_file()
        if cfg.eval.enabled and cfg.eval.initial and not initial_done:
            evaluate_as(tag="initial")
        alerts: dict[str, dict] = over_budget  # the start-up checks' alerts; each stage adds its own
        for stage_name, stage in run_stages(cfg):
            if stage_name != "train" and start.checkpoint is not None and start.stage == "train":
                log.info("resuming: the %s stage finished before checkpoint %s; not repeated", stage_name,
                         start.checkpoint)
                continue
            # the checkpoint this stage takes up: the resumed stage's own, none for the stages after it; one saved
            # at the stage's last step means the stage had finished
            resume = start.checkpoint if stage_name == start.stage else None
            finished = resume is not None and start.step is not None and start.step >= stage.max_steps
            callbacks = [*_monitoring_callbacks(cfg, stage, run_dir),
                         StopOnSignalCallback(watch)]
            periodic = selection = None
            if cfg.eval.enabled and cfg.eval.every_steps and (stage_name == "train" or cfg.eval.during_warmup):
                # a warm-up's evaluations are tagged with its name, so they never overwrite the main stage's
                prefix = "" if stage_name == "train" else f"{stage_name}_"
                if selecting:
                    selection = StageSelection(run_dir, stage_name, cfg.eval.select_metric, cfg.eval.select_mode)
                    selection.take_up(start.step if resume is not None else None)
                periodic = PeriodicEvalCallback(
                    lambda tag, prefix=prefix: evaluate_as(tag=prefix + tag, num_samples=cfg.eval.during_num_samples),
                    cfg.eval.every_steps, on_result=_candidate_offer(selection))
                callbacks = [*callbacks, periodic]
            stage_data = (task.main_stage_data(stage, data) if stage_name == "train"
                          else task.warmup_data(stage, model, tokenizer, data, run_dir))
            stage_setup = setup if stage_data is data else dataclasses.replace(setup, data=stage_data)
            trainer = build_trainer(stage_setup, stage, stage_name, callbacks)
            if periodic is not None:
                periodic.trainer = trainer
            watch.training = True
            try:
                if finished:
                    # Killed after the stage's last step (during its evaluation, or before the next stage saved a
                    # checkpoint): transformers would train one step past max_steps when resumed there, so the
                    # checkpoint is only loaded.
                    trainer._load_from_checkpoint(resume)
                    trainer.metrics_file.last.update(_last_train_row(run_dir, stage_name))
                else:
                    trainer.train(resume_from_checkpoint=resume)
            finally:
                watch.training = False
            alerts.update({name: info for cb in callbacks for name, info in getattr(cb, "fired", {}).items()})
            if watch.received:
                raise RunInterrupted(watch.received, f"checkpoint saved at step {trainer.state.global_step}")
            stop = next((cb.stop_reason for cb in callbacks if getattr(cb, "stop_reason", None)), None)
            if stop:
                raise RunStopped(stop)
            if selection is not None:
                _select_at_stage_end(selection, trainer, periodic.evaluate_fn,
                                     start.step if finished else trainer.state.global_step)
            if stage_name != "train" and cfg.eval.enabled and cfg.eval.after_warmup:
                if finished and run_dir.eval_report(stage_name).is_file():
                    log.info("resuming: the %s stage's evaluation finished before; not repeated", stage_name)
                else:
                    evaluate_final(tag=stage_name)
        trainer.save_model(str(run_dir.adapter))  # every process takes part (a sharded model is gathered); main writes
        if distributed.is_main():
            tokenizer.save_pretrained(str(run_dir.adapter))
        eval_metrics = evaluate_final() if cfg.eval.enabled else {}
        if eval_metrics and distributed.is_main():
            _check_calibration_regression(cfg, run_dir, trainer.state.global_step)
        final = summary.write("completed", final_metrics=trainer.metrics_file.last, eval_metrics=eval_metrics,
                              extra={"alerts": {**alerts, **run_dir.fired_alerts()}, **task.summary(),
                                     **({"selection": _selections(cfg, run_dir)} if selecting else {}),
                                     **({"prompts_over_limit": prompts_over} if prompts_over else {})})
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
        run_summary.print_final_screen(final)
    return final


def _candidate_offer(selection):
    """What the periodic evaluation calls with each result under checkpoint selection: the step becomes a
    candidate, its adapter saved when it is the best so far; None without selection."""
    if selection is None:
        return None

    def offer(step: int, tag: str, metrics: dict, trainer) -> None:
        selection.offer(step, tag, metrics, save_adapter=lambda path: trainer.save_model(str(path)))

    return offer


def _select_at_stage_end(selection, trainer, evaluate_fn, step: int) -> None:
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
        trainer._load_from_checkpoint(record["adapter"])
    chosen = record["selected"]
    log.info("selection (%s): step %s chosen by %s (%s) = %s, of %d candidates", selection.stage, chosen["step"],
             record["metric"], record["mode"], chosen["value"], len(record["candidates"]))


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


def _last_train_row(run_dir: RunDir, stage: str = "train") -> dict:
    from ao_calib.runs.records import read_metrics

    rows = [r for r in read_metrics(run_dir) if r.get("stage", "train") == stage]
    return rows[-1] if rows else {}


class RunStopped(AOCalibError):
    """A monitor stopped the run (e.g. the judge has been down for too many steps)."""


def _record(summary, status: str, **fields) -> None:
    """The final status, when the disk still takes it: a run that cannot write it (a full disk) stays "running"
    with its process id, which ``ao_calib.report`` shows as "crashed" once the process is gone."""
    try:
        summary.write(status, **fields)
    except OSError as exc:
        log.error("could not record status %r in %s (%s)", status, summary.run_dir.summary, exc)


def _monitoring_callbacks(cfg: DictConfig, stage: DictConfig, run_dir: RunDir) -> list:
    """Failure-mode alerts for stages that sample their own completions (not SFT)."""
    if stage.name == "sft":
        return []
    from ao_calib.monitoring.callback import AlertCallback, JudgeOutageCallback, training_alerts
    from ao_calib.monitoring.end_of_run import calibration_alerts

    return [AlertCallback([*training_alerts(cfg.alerts), *calibration_alerts(cfg.alerts)], cfg.alerts.patience,
                          record_to=run_dir.alerts),
            JudgeOutageCallback(cfg.alerts.judge_outage_stop_after, record_to=run_dir.alerts)]


def _generation_budgets(cfg: DictConfig) -> dict[str, tuple[str, int | None]]:
    """The key and token budget each split's answers are generated under: the held-out split by the evaluation,
    the training split by the main stage's rollouts (none for SFT, which samples nothing)."""
    eval_key, eval_budget = eval_token_budget(cfg)
    return {"test": (eval_key, eval_budget if cfg.eval.enabled else None),
            "train": ("trainer.max_completion_length", cfg.trainer.get("max_completion_length"))}


def _eval_kwargs(cfg: DictConfig, run_dir: RunDir) -> dict:
    return {
        "num_samples": cfg.eval.num_samples,
        "batch_size": cfg.eval.batch_size,
        "max_new_tokens": eval_max_new_tokens(cfg),
        "chat_template_kwargs": OmegaConf.to_container(cfg.model.chat_template_kwargs, resolve=True),
        "run_dir": run_dir,
        "mismatches_printed": cfg.eval.mismatches_printed,
        "temperature": cfg.eval.temperature,
        "seed": cfg.eval.seed,
        "merged_copy": cfg.eval.merged_copy,
        "confidence_decoding": cfg.eval.confidence_decoding,
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


@hydra.main(version_base="1.3", config_path="../conf", config_name="config")
def main(cfg: DictConfig) -> float | None:
    run_dir = RunDir(HydraConfig.get().runtime.output_dir)
    distributed.export_submitit_environment()
    distributed.log_to_own_file(run_dir)
    try:
        check_recipe_choices()  # first: a group choice the recipe merged over would show up as a stranger error
        validate_plugins(cfg)
        extra = unknown_keys(cfg)
        if extra:
            raise AOCalibError(f"unknown config key(s): {', '.join(extra)} (check the spelling; "
                               "`python -m ao_calib.run --cfg job` prints the full config)")
        check_values(cfg)
        check_combinations(cfg)
        from ao_calib.trainers.common import check_process_split  # torch: after the checks that need none

        check_process_split(cfg)
        sharding.check_stages(cfg)
        # The main process decides (another one would find the main's first files and call the directory used).
        start = distributed.on_main(lambda: _decide_start(cfg, run_dir))
        if start.finished is not None:
            if not distributed.is_main():
                return None
            print(f"{run_dir}: this run already completed step {start.finished['final_metrics']['step']} "
                  f"(trainer.max_steps={cfg.trainer.max_steps}); nothing to resume. Raise trainer.max_steps to "
                  "train further.", flush=True)
            return start.finished.get("eval_metrics", {}).get("accuracy")
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
                       else "python -m ao_calib.run")
            print(f"\n{exc or 'interrupted by ' + signal_name}. Resume with: {command} <same overrides> "
                  f"trainer.resume_from_checkpoint=latest hydra.run.dir={run_dir}", file=sys.stderr, flush=True)
        if getattr(exc, "watch", None) is not None:
            exc.watch.hand_over()
        raise SystemExit(getattr(exc, "exit_code", 130)) from None
    finally:
        distributed.shutdown()
    # The value an optimising sweeper (hparams_search) maximises.
    return summary["eval_metrics"].get("accuracy", summary["final_metrics"].get("reward"))


def cli() -> None:
    """``python -m ao_calib.run``: the schemas the config files build on are registered (the installed plug-ins'
    included; a broken plug-in stops here with its own error), then Hydra composes and ``main`` runs."""
    try:
        register_schemas()
    except AOCalibError as exc:
        print(f"error: {exc}", file=sys.stderr, flush=True)
        raise SystemExit(2) from None
    topic = cli_help.help_topic(sys.argv[1:])
    if topic is not None:  # `--help trainer.lr`: Hydra would read the key as a malformed override
        raise SystemExit(cli_help.print_topic_help(topic))
    main()


if __name__ == "__main__":
    cli()
