"""``python -m ao_calib.run``: compose the config, then train, evaluate and record one run.

Heavy libraries are imported inside ``train`` so ``--help`` and config composition stay fast.
"""

from __future__ import annotations

import logging
import sys
import warnings
from pathlib import Path

import hydra
from hydra.core.hydra_config import HydraConfig
from omegaconf import DictConfig, OmegaConf

from ao_calib.config import unknown_keys
from ao_calib.errors import AOCalibError

log = logging.getLogger("ao_calib")
# transformers 5 renamed gradient checkpointing; TRL 1.16 still sets the old name on every config and model.
warnings.filterwarnings("ignore", message=r".*gradient_checkpointing.* is deprecated", category=FutureWarning)


def train(cfg: DictConfig, run_dir: Path) -> dict:
    """The pipeline, one step per line. Returns the run summary."""
    from ao_calib import models, results
    from ao_calib.evaluation import evaluate
    from ao_calib.rewards import build_reward_schedule
    from ao_calib.task_api import get_task
    from ao_calib.trainers import build_trainer, latest_checkpoint

    summary = results.RunSummary(run_dir)
    try:
        task = get_task(cfg)
        models.check_model_available(cfg.model, task.pretrained_adapter())
        source = models.model_source(cfg.model, cfg.paths.cache_dir)
        tokenizer = models.load_tokenizer(source)
        model = models.attach_lora(models.load_base_model(cfg.model, source), cfg.model, cfg.trainer,
                                   task.pretrained_adapter())
        data = task.build_data(tokenizer)
        schedule = build_reward_schedule(cfg.reward, task.reward_functions())
        summary.wandb_run_id = results.init_wandb(cfg, run_dir)
        eval_kwargs = _eval_kwargs(cfg, run_dir)
        if cfg.eval.enabled and cfg.eval.initial:
            evaluate(task, model, tokenizer, data.test, tag="initial", **eval_kwargs)
        trainer = build_trainer(cfg, model, tokenizer, data, schedule, task.reward_functions(), run_dir,
                                report_to_wandb=summary.wandb_run_id is not None)
        summary.write("running")
        trainer.train(resume_from_checkpoint=latest_checkpoint(cfg.trainer.resume_from_checkpoint, run_dir))
        trainer.save_model(str(run_dir / "adapter"))
        tokenizer.save_pretrained(str(run_dir / "adapter"))
        eval_metrics = evaluate(task, model, tokenizer, data.test, **eval_kwargs) if cfg.eval.enabled else {}
        final = summary.write("completed", final_metrics=trainer.metrics_file.last, eval_metrics=eval_metrics)
    except BaseException as exc:
        summary.write("failed", error=f"{type(exc).__name__}: {exc}")
        raise
    finally:
        results.finish_wandb()
    results.print_final_screen(final)
    return final


def _eval_kwargs(cfg: DictConfig, run_dir: Path) -> dict:
    return {
        "num_samples": cfg.eval.num_samples,
        "batch_size": cfg.eval.batch_size,
        "max_new_tokens": cfg.eval.max_new_tokens or cfg.trainer.max_completion_length,
        "chat_template_kwargs": OmegaConf.to_container(cfg.model.chat_template_kwargs, resolve=True),
        "out_dir": run_dir,
        "mismatches_printed": cfg.eval.mismatches_printed,
    }


@hydra.main(version_base="1.3", config_path="../conf", config_name="config")
def main(cfg: DictConfig) -> float | None:
    run_dir = Path(HydraConfig.get().runtime.output_dir)
    try:
        extra = unknown_keys(cfg)
        if extra:
            raise AOCalibError(f"unknown config key(s): {', '.join(extra)} (check the spelling; "
                               "`python -m ao_calib.run --cfg job` prints the full config)")
        summary = train(cfg, run_dir)
    except AOCalibError as exc:
        log.error("%s", exc)
        print(f"error: {exc}", file=sys.stderr, flush=True)
        raise SystemExit(2) from None
    # The value an optimising sweeper (hparams_search) maximises.
    return summary["eval_metrics"].get("accuracy", summary["final_metrics"].get("reward"))


if __name__ == "__main__":
    main()
