"""Weights & Biases for ``logger=wandb``, beside the local files; a wandb failure never stops a run."""

from __future__ import annotations

import logging
import os
import sys
from pathlib import Path

from omegaconf import DictConfig, OmegaConf

from ao_calib.runtime.offline import wandb_credentials

log = logging.getLogger(__name__)
_first_start = True  # init_wandb not yet called in this process


def init_wandb(cfg: DictConfig, run_dir: Path, run_id: str | None = None) -> str | None:
    """Starts wandb for ``logger=wandb``; never blocks the run: on any failure it warns and returns None.
    ``run_id``: the wandb run a resumed run continues (its curves go on in the same run)."""
    if cfg.logger.name != "wandb":
        return None
    mode = cfg.logger.mode
    if mode == "auto":
        mode = "online" if wandb_credentials() else "offline"
    global _first_start
    if _first_start:  # no wandb service started by this module yet: a WANDB_SERVICE now came from a parent process
        # A parent's wandb service would hold this run's stream past a kill -9, and the resume would find the id in use
        os.environ.pop("WANDB_SERVICE", None)
        _first_start = False
    try:
        import wandb

        run = wandb.init(
            project=cfg.logger.project, entity=cfg.logger.entity, name=cfg.run_name, dir=str(run_dir),
            mode=mode, tags=list(cfg.logger.tags), config=OmegaConf.to_container(cfg, resolve=True),
            id=run_id, resume="allow" if run_id else None,
            settings=wandb.Settings(init_timeout=cfg.logger.init_timeout_s, silent=True),
        )
        log.info("wandb %s run %s", mode, run.id)
        return run.id
    except Exception as exc:  # noqa: BLE001 -- any wandb failure must not stop training
        log.warning("wandb could not start (%s: %s); continuing with local logs only", type(exc).__name__, exc)
        return None


def finish_wandb() -> None:
    try:
        if "wandb" in sys.modules:
            import wandb

            if wandb.run is not None:
                wandb.finish()
    except Exception as exc:  # noqa: BLE001
        log.warning("wandb.finish failed: %s", exc)


def log_evaluation(tag: str, metrics: dict) -> None:
    """An evaluation's figures into the wandb run's summary as ``eval_<tag>/<name>``, when a run is active."""
    if "wandb" not in sys.modules:
        return
    import wandb

    if wandb.run is not None:
        wandb.run.summary.update({f"eval_{tag}/{k}": v for k, v in metrics.items() if isinstance(v, (int, float))})
