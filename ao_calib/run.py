"""``python -m ao_calib.run``: compose the config, then train, evaluate and record one run.

Heavy libraries are imported inside ``train`` so ``--help`` and config composition stay fast.
"""

from __future__ import annotations

import dataclasses
import functools
import logging
import sys
import warnings

import hydra
from hydra.core.hydra_config import HydraConfig
from omegaconf import DictConfig, OmegaConf

from ao_calib import cli_help  # noqa: F401 -- registers the resolver the --help text lists groups with
from ao_calib.config import unknown_keys, validate_plugins
from ao_calib.errors import AOCalibError
from ao_calib.io import atomic_write_text
from ao_calib.run_dir import RunDir

log = logging.getLogger("ao_calib")
# transformers 5 renamed gradient checkpointing; TRL 1.16 still sets the old name on every config and model.
warnings.filterwarnings("ignore", message=r".*gradient_checkpointing.* is deprecated", category=FutureWarning)


def train(cfg: DictConfig, run_dir: RunDir) -> dict:
    """The pipeline, one step per line. Returns the run summary."""
    from transformers import set_seed

    from ao_calib import models
    from ao_calib.evaluation import evaluate
    from ao_calib.reporting import summary as run_summary
    from ao_calib.reporting import wandb as run_wandb
    from ao_calib.rewards import build_reward_schedule
    from ao_calib.task_api import build_task
    from ao_calib.trainers import TrainerSetup, build_trainer, latest_checkpoint
    from ao_calib.trainers.callbacks import PeriodicEvalCallback

    summary = run_summary.RunSummary(run_dir)
    try:
        set_seed(cfg.trainer.seed)  # LoRA initialisation and data sampling happen before any trainer seeds itself
        task = build_task(cfg)
        adapter = (models.resolve_init_adapter(cfg.trainer.init_from, cfg.model) if cfg.trainer.init_from
                   else task.pretrained_adapter())
        models.check_model_available(cfg.model, adapter)
        source = models.model_source(cfg.model, cfg.paths.cache_dir)
        tokenizer = models.load_tokenizer(source)
        model = models.attach_lora(models.load_base_model(cfg.model, source), cfg.model, cfg.trainer, adapter)
        data = task.build_data(tokenizer, model)
        reward_fns = task.reward_functions() if cfg.trainer.name != "sft" else {}
        schedule = build_reward_schedule(cfg.reward, reward_fns) if reward_fns else None
        summary.wandb_run_id = run_wandb.init_wandb(cfg, run_dir)
        setup = TrainerSetup(cfg, model, tokenizer, data, run_dir, schedule, reward_fns, task.steering(),
                             report_to_wandb=summary.wandb_run_id is not None)
        evaluate_as = functools.partial(evaluate, task, model, tokenizer, data.test, **_eval_kwargs(cfg, run_dir))
        if cfg.eval.enabled and cfg.eval.initial:
            evaluate_as(tag="initial")
        summary.write("running")
        alerts: dict[str, dict] = {}
        for stage_name, stage in _stages(cfg):
            callbacks = [*task.training_callbacks(stage.name), *_monitoring_callbacks(cfg, stage)]
            periodic = None
            if cfg.eval.enabled and cfg.eval.every_steps:
                periodic = PeriodicEvalCallback(
                    lambda tag: evaluate_as(tag=tag, num_samples=cfg.eval.during_num_samples), cfg.eval.every_steps)
                callbacks = [*callbacks, periodic]
            stage_setup = setup if stage_name == "train" else dataclasses.replace(
                setup, data=task.warmup_data(stage, model, tokenizer, data, run_dir))
            trainer = build_trainer(stage_setup, stage, stage_name, callbacks)
            if periodic is not None:
                periodic.trainer = trainer
            resume = latest_checkpoint(stage.resume_from_checkpoint, run_dir) if stage_name == "train" else None
            trainer.train(resume_from_checkpoint=resume)
            alerts.update({name: info for cb in callbacks for name, info in getattr(cb, "fired", {}).items()})
            if stage_name != "train" and cfg.eval.enabled and cfg.eval.after_warmup:
                evaluate_as(tag=stage_name)
        trainer.save_model(str(run_dir.adapter))
        tokenizer.save_pretrained(str(run_dir.adapter))
        eval_metrics = evaluate_as() if cfg.eval.enabled else {}
        final = summary.write("completed", final_metrics=trainer.metrics_file.last, eval_metrics=eval_metrics,
                              extra={"alerts": alerts, **task.summary()})
    except BaseException as exc:
        summary.write("failed", error=f"{type(exc).__name__}: {exc}")
        raise
    finally:
        run_wandb.finish_wandb()
    run_summary.print_final_screen(final)
    return final


def _monitoring_callbacks(cfg: DictConfig, stage: DictConfig) -> list:
    """Failure-mode alerts for stages that sample their own completions (not SFT)."""
    if stage.name == "sft":
        return []
    from ao_calib.calibration.alerts import calibration_alerts
    from ao_calib.trainers.alerts import AlertCallback, training_alerts

    return [AlertCallback([*training_alerts(cfg.alerts), *calibration_alerts(cfg.alerts)], cfg.alerts.patience)]


def _stages(cfg: DictConfig) -> list[tuple[str, DictConfig]]:
    """An optional warm-up SFT stage, then the configured trainer, on the same adapter."""
    return ([("warmup", cfg.warmup)] if cfg.warmup is not None else []) + [("train", cfg.trainer)]


def _eval_kwargs(cfg: DictConfig, run_dir: RunDir) -> dict:
    return {
        "num_samples": cfg.eval.num_samples,
        "batch_size": cfg.eval.batch_size,
        "max_new_tokens": cfg.eval.max_new_tokens or cfg.trainer.get("max_completion_length", 128),
        "chat_template_kwargs": OmegaConf.to_container(cfg.model.chat_template_kwargs, resolve=True),
        "run_dir": run_dir,
        "mismatches_printed": cfg.eval.mismatches_printed,
        "temperature": cfg.eval.temperature,
        "seed": cfg.eval.seed,
    }


def write_full_config(cfg: DictConfig, run_dir: RunDir) -> None:
    """The full config, every default included, beside Hydra's composed one: what the run really used."""
    atomic_write_text(run_dir / RunDir.CONFIG, OmegaConf.to_yaml(cfg))


@hydra.main(version_base="1.3", config_path="../conf", config_name="config")
def main(cfg: DictConfig) -> float | None:
    run_dir = RunDir(HydraConfig.get().runtime.output_dir)
    try:
        validate_plugins(cfg)
        extra = unknown_keys(cfg)
        if extra:
            raise AOCalibError(f"unknown config key(s): {', '.join(extra)} (check the spelling; "
                               "`python -m ao_calib.run --cfg job` prints the full config)")
        write_full_config(cfg, run_dir)
        summary = train(cfg, run_dir)
    except AOCalibError as exc:
        log.error("%s", exc)
        print(f"error: {exc}", file=sys.stderr, flush=True)
        raise SystemExit(2) from None
    # The value an optimising sweeper (hparams_search) maximises.
    return summary["eval_metrics"].get("accuracy", summary["final_metrics"].get("reward"))


if __name__ == "__main__":
    main()
