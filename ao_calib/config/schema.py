"""The run's config schemas (model, reward, logger, paths, eval and the top-level ``Config``): each default stated once
with its help text and the values it allows (``ao_calib.core.settings.setting``); the YAML files in ``conf/`` set
only what a preset changes. Imports nothing heavy."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Optional

from omegaconf import MISSING

from ao_calib.config.search import SearchConfig
from ao_calib.core.settings import Checked, above, at_least, one_of, setting
from ao_calib.evaluation.config import EvalConfig
from ao_calib.models.config import ModelConfig
from ao_calib.monitoring.config import AlertsConfig
from ao_calib.trainers.config import SFTWarmupConfig, TrainerConfig


@dataclass
class RewardPhaseConfig(Checked):
    """One curriculum phase: ``weights`` apply while the optimiser step is below ``until_step`` (null: to the end)."""

    until_step: Optional[int] = setting(None, "The phase ends at this optimiser step; null: at the end.",
                                        allowed=at_least(1))
    weights: dict[str, float] = setting({}, "Reward function name -> weight in this phase.")


@dataclass
class RewardConfig(Checked):
    """A weighted mix of the task's reward functions; the trained reward is the weighted sum."""

    name: str = setting(MISSING, "Name of the mix (the reward config's file name).")
    weights: dict[str, float] = setting({}, "Reward function name -> weight; the trained reward is the weighted sum.")
    phases: list[RewardPhaseConfig] = setting([], "A curriculum: weights switched by optimiser step (each phase: "
                                              "until_step, weights).")
    components: dict[str, Any] = setting(
        {}, "Reward functions from your own code, by name: {_target_: pkg.module.fn, weight: ..., kwargs: {...}} "
        "(checked and loaded by ao_calib.rewards.component_settings, which states their defaults).")


@dataclass
class LoggerConfig(Checked):
    """Where metrics are logged besides the run directory."""

    name: str = setting("none", "Logger: none or wandb.", allowed=one_of("none", "wandb"))
    project: str = setting("ao_calib", "wandb project.")
    entity: Optional[str] = setting(None, "wandb entity (team or user); null: your default.")
    mode: str = setting("auto", "wandb mode: auto (online when WANDB_API_KEY is set or wandb is logged in, offline "
                        "otherwise), online, offline, disabled.")
    tags: list[str] = setting([], "wandb tags of the run.")
    init_timeout_s: float = setting(60.0, "Seconds wandb may take to start before the run goes on without it.",
                                    allowed=above(0))


@dataclass
class PathsConfig(Checked):
    """Where runs and rebuildable artefacts are written."""

    root_dir: str = setting(MISSING, "Relative paths are taken from here (AO_CALIB_ROOT, else the directory you "
                            "launch from).")
    output_dir: str = setting(MISSING, "Runs and sweeps are written under this directory.")
    cache_dir: str = setting(MISSING, "Tiny offline models, generated data, activations and other rebuildable "
                             "artefacts (AO_CALIB_CACHE).")
    data_dir: str = setting(MISSING, "The data shipped with ao_calib that presets read (the BFCL v4 fixtures): the "
                            "installed package's copy, else the clone's data/.")


@dataclass
class Config:
    task: Any = setting(MISSING, "The task (a plug-in group: typed by its class's config_class after composition).")
    model: ModelConfig = setting(MISSING, "The base model.")
    trainer: TrainerConfig = setting(MISSING, "The training stage.")
    reward: RewardConfig = setting(MISSING, "The reward mix.")
    judge: Any = setting(MISSING, "The judge (a plug-in group: typed by its class's config_class after "
                         "composition).")
    logger: LoggerConfig = setting(MISSING, "The logger.")
    paths: PathsConfig = setting(MISSING, "Output and cache directories.")
    eval: EvalConfig = setting(factory=EvalConfig, help="Held-out evaluation.")
    alerts: AlertsConfig = setting(factory=AlertsConfig, help="Failure-mode alerts.")
    search: SearchConfig = setting(factory=SearchConfig, help="What a run returns to an optimising sweep "
                                   "(hparams_search).")
    warmup: Optional[SFTWarmupConfig] = setting(None, "An SFT stage run before trainer on the same adapter: "
                                                 "warmup=sft (the task's reference completions) or warmup=format "
                                                 "(the model's own answers, tagged); null: none.")
    run_name: str = setting("${task.name}-${model.name}-${trainer.name}", "The run's name (wandb, reports).")
