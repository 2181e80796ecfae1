"""An optimising sweep (``hparams_search=<option>``, conf/hparams_search/): the figure each run returns to it
(``search.objective``), and the start-up check that it can only be a validation figure."""

from __future__ import annotations

import math
import sys
from dataclasses import dataclass
from typing import Any

from hydra.experimental.callback import Callback
from omegaconf import DictConfig, OmegaConf

from ao_calib.core.errors import AOCalibError
from ao_calib.core.settings import Checked, setting
from ao_calib.evaluation.selection import lower_is_better

SPLIT_KEY = "task.data.eval_split"


@dataclass
class SearchConfig(Checked):
    """What a run returns to an optimising sweep (hparams_search)."""

    objective: str = setting(
        "accuracy", "The figure of the final evaluation a run returns to an optimising sweep (hparams_search), which "
        "scores the validation split: a name the task's evaluation reports (accuracy, brier, ece, auroc...).")


def check_search(cfg: DictConfig, hydra: DictConfig) -> None:
    """Refuses a run of ``hparams_search=<option>`` whose returned figure would not come from the validation split
    (``task.data.eval_split`` other than validation, no final evaluation, or a final one on the test split under
    ``eval.select_metric``), or whose sweeper would optimise it the wrong way. ``hydra``: Hydra's own node."""
    option = OmegaConf.select(hydra, "runtime.choices.hparams_search", default=None)
    if option is None:
        return
    split = OmegaConf.select(cfg, SPLIT_KEY, default=None)
    if split != "validation":
        raise AOCalibError(f"hparams_search={option} optimises a figure of the validation split, and {SPLIT_KEY}="
                           f"{split} would tune the settings on the split the results are reported on; set "
                           f"{SPLIT_KEY}=validation")
    if not cfg.eval.enabled:
        raise AOCalibError(f"hparams_search={option} optimises a figure of the final evaluation: set eval.enabled=true")
    if cfg.eval.select_metric is not None:
        raise AOCalibError(f"hparams_search={option} optimises a figure of the final evaluation, which "
                           f"eval.select_metric={cfg.eval.select_metric} moves to the test split; set "
                           "eval.select_metric=null")
    direction = OmegaConf.select(hydra, "sweeper.direction", default=None)
    objective = cfg.search.objective
    if isinstance(direction, str) and (direction == "minimize") != lower_is_better(objective, "auto"):
        better = "lower" if lower_is_better(objective, "auto") else "higher"
        raise AOCalibError(f"search.objective={objective} is better {better}, but hydra.sweeper.direction="
                           f"{direction}; set hydra.sweeper.direction={'minimize' if better == 'lower' else 'maximize'}")


def searching() -> bool:
    """Whether this run is a job of an optimising sweep (``hparams_search=<option>``)."""
    from hydra.core.hydra_config import HydraConfig

    return HydraConfig.initialized() and OmegaConf.select(HydraConfig.get(), "runtime.choices.hparams_search",
                                                          default=None) is not None


def check_objective_name(objective: str, task) -> None:
    """Refuses, before the model loads, an objective the task's evaluation does not report, listing those it does."""
    names = task.metric_names()
    if objective not in names:
        raise AOCalibError(f"search.objective={objective}: task={task.name}'s evaluation reports no such figure; it "
                           f"reports: {', '.join(sorted(names))}")


def returned_value(summary: dict, objective: str) -> float | None:
    """What a run returns to an optimising sweep: ``objective`` of its final evaluation (NaN when the evaluation
    left it out, which fails the trial rather than scoring it); with evaluation off, the final training reward."""
    metrics = summary.get("eval_metrics") or {}
    if metrics:
        return metrics.get(objective, math.nan)
    return (summary.get("final_metrics") or {}).get("reward")


class SearchOnValidation(Callback):
    """``check_search`` as Hydra starts a run or a sweep, before it makes any run directory (exit 2)."""

    def on_run_start(self, config: DictConfig, **kwargs: Any) -> None:
        _refuse_at_start(config)

    def on_multirun_start(self, config: DictConfig, **kwargs: Any) -> None:
        _refuse_at_start(config)


def _refuse_at_start(config: DictConfig) -> None:
    try:
        check_search(config, config.hydra)
    except AOCalibError as exc:
        print(f"error: {exc}", file=sys.stderr, flush=True)
        raise SystemExit(2) from None
