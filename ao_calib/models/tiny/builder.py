"""Tiny random-initialised Qwen3 / Gemma 3 checkpoints for tests and the offline quickstart.

The checkpoints use the same model classes the real ones load as (`Qwen3ForCausalLM`,
`Gemma3ForConditionalGeneration`), a locally trained byte-level BPE tokenizer and chat
templates of the real shape, and are saved as ordinary HF checkpoints so that everything
downstream goes through the normal `from_pretrained` path without network access.

Builds are cached under `cache_dir/<family>-<hash>/`. The hash covers the spec, the corpus,
the chat templates and the builder version, so any of those changing gives a new directory.
A build goes into a private temp directory that is renamed into place in one step, so
concurrent builders (sweep jobs, pytest-xdist) never see a half-written checkpoint.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import shutil
import tempfile
import time
import uuid
from pathlib import Path

import torch

from ao_calib.models.config import TinyModelConfig

from ao_calib.models.tiny.chat_templates import CHAT_TEMPLATES
from ao_calib.models.tiny.corpus import corpus_texts

# Bump when the build procedure changes in a way the hash inputs do not capture.
BUILDER_VERSION = 3
# Target std of the initial logits. A random model's final RMSNorm caps logits at about
# sqrt(hidden) * initializer_range (~0.16 here): a near-uniform next-token distribution that a LoRA cannot sharpen,
# since the norm weight and the tied embeddings stay frozen. Real checkpoints have large trained norm weights;
# scaling the tiny model's final norm gives it logits on a realistic scale.
LOGIT_STD = 2.0

FAMILIES = ("qwen3", "gemma3")

# Written last into a build directory; a cache entry without it is never used.
_COMPLETE_MARKER = ".tiny_model_complete.json"
# Temp build dirs older than this are assumed to belong to crashed builders.
_STALE_TMP_SECONDS = 3600

_QWEN3_SPECIALS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
# Real Qwen3 registers these as added but *non-special* tokens: they are single ids yet survive
# `decode(skip_special_tokens=True)`, which reward parsers rely on.
_QWEN3_PLAIN_ADDED = ["<think>", "</think>", "<tool_call>", "</tool_call>"]
# Order fixes pad=0, eos=1, bos=2, unk=3 as in the real Gemma tokenizer.
_GEMMA3_SPECIALS = ["<pad>", "<eos>", "<bos>", "<unk>", "<start_of_turn>", "<end_of_turn>",
                    "<start_of_image>", "<end_of_image>", "<image_soft_token>"]


# The spec is the model config's `tiny` block, so a config and a direct call describe a model the same way.
TinyModelSpec = TinyModelConfig


# --------------------------------------------------------------------------- public API


def tiny_model_key(spec: TinyModelSpec, texts: list[str] | None = None) -> str:
    """Short hash naming the cache entry for `spec` (and the corpus / templates / builder)."""
    texts = corpus_texts() if texts is None else texts
    import transformers  # local: keep module import light for callers that only need the spec

    payload = {
        "spec": dataclasses.asdict(spec),
        "corpus": hashlib.sha256("\x00".join(texts).encode()).hexdigest(),
        "template": CHAT_TEMPLATES.get(spec.family, ""),
        "builder": BUILDER_VERSION,
        "logit_std": LOGIT_STD,
        # The on-disk format follows transformers; rebuilding after an upgrade costs seconds.
        "transformers": transformers.__version__,
    }
    return hashlib.sha256(json.dumps(payload, sort_keys=True).encode()).hexdigest()[:12]


def ensure_tiny_model(spec: TinyModelSpec, cache_dir: str | Path) -> Path:
    """Return a directory with a complete tiny HF checkpoint for `spec`, building it if needed."""
    if spec.family not in FAMILIES:
        raise ValueError(f"unknown tiny model family {spec.family!r}; expected one of {FAMILIES}")
    cache_dir = Path(cache_dir)
    cache_dir.mkdir(parents=True, exist_ok=True)
    texts = corpus_texts()
    final = cache_dir / f"{spec.family}-{tiny_model_key(spec, texts)}"
    if _is_complete(final):
        return final

    _remove_stale_tmp_dirs(cache_dir)
    tmp = Path(tempfile.mkdtemp(prefix=f".tmp-{final.name}-", dir=cache_dir))
    try:
        _build(spec, texts, tmp)
        (tmp / _COMPLETE_MARKER).write_text(
            json.dumps({"spec": dataclasses.asdict(spec), "builder": BUILDER_VERSION}, indent=1))
        # mkdtemp makes the dir 0700; a cache shared between users / containers needs it readable.
        os.chmod(tmp, 0o755)
        return _publish(tmp, final)
    finally:
        # After a successful rename `tmp` no longer exists; otherwise this discards our copy.
        shutil.rmtree(tmp, ignore_errors=True)


# --------------------------------------------------------------------------- cache handling


def _is_complete(path: Path) -> bool:
    return (path / _COMPLETE_MARKER).is_file()


def _publish(tmp: Path, final: Path) -> Path:
    """Atomically move a finished build to `final`; if another builder won, use theirs."""
    try:
        # rename() of a directory is atomic and fails if `final` is a non-empty directory.
        os.rename(tmp, final)
        return final
    except OSError:
        if _is_complete(final):
            return final  # a concurrent builder finished first; the caller deletes our copy
    # `final` exists but lacks the marker (made by hand or by a non-atomic tool): move it aside
    # (also atomic) and try once more.
    aside = final.with_name(f".stale-{final.name}-{uuid.uuid4().hex[:8]}")
    try:
        if not _is_complete(final):
            os.rename(final, aside)
    except OSError:
        pass
    shutil.rmtree(aside, ignore_errors=True)
    try:
        os.rename(tmp, final)
    except OSError:
        if not _is_complete(final):
            raise
    return final


def _remove_stale_tmp_dirs(cache_dir: Path) -> None:
    # Best effort: only old ones, so a concurrent builder's live temp dir is never touched.
    now = time.time()
    for p in list(cache_dir.glob(".tmp-*")) + list(cache_dir.glob(".stale-*")):
        try:
            if now - p.stat().st_mtime > _STALE_TMP_SECONDS:
                shutil.rmtree(p, ignore_errors=True)
        except OSError:
            pass


# --------------------------------------------------------------------------- building


def build_random_model(spec: TinyModelSpec, dtype: torch.dtype = torch.float32, device: str | torch.device = "cpu",
                       attn_implementation: str | None = None):
    """``(model, tokenizer)`` as ``ensure_tiny_model`` would save them, built in memory in ``dtype`` on ``device``.

    For benchmarks of full-size shapes (a random Qwen3-8B or Gemma-3-27B): those would take tens of GB on disk and
    minutes to initialise on a CPU, but seconds on a GPU."""
    if spec.family not in FAMILIES:
        raise ValueError(f"unknown tiny model family {spec.family!r}; expected one of {FAMILIES}")
    texts = corpus_texts()
    model, tokenizer = _make(spec, texts, dtype, device, attn_implementation)
    # Anything keyed by the model's name (the activation cache) must not take this for a real checkpoint.
    model.config._name_or_path = f"random-{spec.family}-{tiny_model_key(spec, texts)}"
    return model, tokenizer


def _make(spec: TinyModelSpec, texts: list[str], dtype: torch.dtype, device: str | torch.device,
          attn_implementation: str | None = None):
    from transformers import GenerationConfig

    tokenizer = _train_tokenizer(spec, texts)
    if len(tokenizer) > spec.vocab_size:
        raise ValueError(f"tokenizer has {len(tokenizer)} tokens but vocab_size is {spec.vocab_size}")
    names = _QWEN3_SPECIALS + _QWEN3_PLAIN_ADDED if spec.family == "qwen3" else _GEMMA3_SPECIALS
    ids = {t: tokenizer.convert_tokens_to_ids(t) for t in names}

    if spec.family == "qwen3":
        model = _init_model(spec, _qwen3_config(spec, ids), dtype, device, attn_implementation)
        gen = GenerationConfig(bos_token_id=ids["<|endoftext|>"], pad_token_id=ids["<|endoftext|>"],
                               eos_token_id=[ids["<|im_end|>"], ids["<|endoftext|>"]])
    else:
        model = _init_model(spec, _gemma3_config(spec, ids), dtype, device, attn_implementation)
        gen = GenerationConfig(bos_token_id=ids["<bos>"], pad_token_id=ids["<pad>"],
                               eos_token_id=[ids["<eos>"], ids["<end_of_turn>"]])
    model.generation_config = gen
    return model, tokenizer


def _build(spec: TinyModelSpec, texts: list[str], out: Path) -> None:
    model, tokenizer = _make(spec, texts, torch.float32, "cpu")
    # A build takes a fraction of a second; a "Writing model shards" bar is only noise here.
    from transformers.utils import logging as hf_logging

    bars_were_on = hf_logging.is_progress_bar_enabled()
    hf_logging.disable_progress_bar()
    try:
        model.save_pretrained(out)
    finally:
        if bars_were_on:
            hf_logging.enable_progress_bar()
    tokenizer.save_pretrained(out)
    model.generation_config.save_pretrained(out)


def _init_model(spec: TinyModelSpec, config: object, dtype: torch.dtype, device: str | torch.device,
                attn_implementation: str | None = None) -> torch.nn.Module:
    from transformers import AutoModelForCausalLM

    # fork_rng: seeding must not disturb the caller's global RNG streams (e.g. a test's own seed).
    device = torch.device(device)
    forked = [device.index or 0] if device.type == "cuda" else []
    with torch.random.fork_rng(devices=forked), device:
        torch.manual_seed(spec.seed)
        # Same class resolution as from_pretrained, so the tiny model is built as the class the
        # real checkpoint loads as (Gemma3ForConditionalGeneration for model_type "gemma3").
        extra = {"attn_implementation": attn_implementation} if attn_implementation else {}
        model = AutoModelForCausalLM.from_config(config, dtype=dtype, **extra)
    _scale_final_norm(model, spec)
    return model.to(dtype).eval()


@torch.no_grad()
def _scale_final_norm(model: torch.nn.Module, spec: TinyModelSpec) -> None:
    text = model.config.get_text_config()
    scale = LOGIT_STD / (spec.hidden_size**0.5 * text.initializer_range)
    stack = model.model.language_model if spec.family == "gemma3" else model.model
    # Gemma's RMSNorm multiplies by (1 + weight); Qwen3's by weight.
    stack.norm.weight.fill_(scale - 1.0 if spec.family == "gemma3" else scale)


def _qwen3_config(spec: TinyModelSpec, ids: dict[str, int]) -> object:
    from transformers import Qwen3Config

    return Qwen3Config(
        vocab_size=spec.vocab_size, hidden_size=spec.hidden_size,
        intermediate_size=spec.intermediate_size, num_hidden_layers=spec.num_hidden_layers,
        num_attention_heads=spec.num_attention_heads, num_key_value_heads=spec.num_key_value_heads,
        head_dim=spec.head_dim, max_position_embeddings=spec.max_position_embeddings,
        rms_norm_eps=1e-6, tie_word_embeddings=spec.tie_word_embeddings, dtype="float32",
        bos_token_id=ids["<|endoftext|>"], eos_token_id=ids["<|im_end|>"],
        pad_token_id=ids["<|endoftext|>"],
    )


def _gemma3_config(spec: TinyModelSpec, ids: dict[str, int]) -> object:
    from transformers import Gemma3Config, Gemma3TextConfig, SiglipVisionConfig

    # Real Gemma 3 alternates 5 sliding-window layers with 1 global layer. With only a few layers
    # the pattern would give no global layer at all, so the last layer is made global.
    layer_types = ["full_attention" if (i + 1) % 6 == 0 else "sliding_attention"
                   for i in range(spec.num_hidden_layers)]
    if "full_attention" not in layer_types:
        layer_types[-1] = "full_attention"
    text = Gemma3TextConfig(
        vocab_size=spec.vocab_size, hidden_size=spec.hidden_size,
        intermediate_size=spec.intermediate_size, num_hidden_layers=spec.num_hidden_layers,
        num_attention_heads=spec.num_attention_heads, num_key_value_heads=spec.num_key_value_heads,
        head_dim=spec.head_dim, max_position_embeddings=spec.max_position_embeddings,
        query_pre_attn_scalar=spec.hidden_size // spec.num_attention_heads,
        sliding_window=min(spec.sliding_window, spec.max_position_embeddings), layer_types=layer_types,
        pad_token_id=ids["<pad>"], eos_token_id=ids["<eos>"], bos_token_id=ids["<bos>"],
        tie_word_embeddings=spec.tie_word_embeddings, dtype="float32",
    )
    # 32px images in 16px patches -> 2x2 patches; mm_tokens_per_image=4 -> pooling kernel 1.
    vision = SiglipVisionConfig(hidden_size=32, intermediate_size=64, num_hidden_layers=1,
                                num_attention_heads=2, image_size=32, patch_size=16,
                                vision_use_head=False, dtype="float32")
    return Gemma3Config(
        text_config=text, vision_config=vision, mm_tokens_per_image=4,
        boi_token_index=ids["<start_of_image>"], eoi_token_index=ids["<end_of_image>"],
        image_token_index=ids["<image_soft_token>"], tie_word_embeddings=spec.tie_word_embeddings,
        dtype="float32",
    )


def _train_tokenizer(spec: TinyModelSpec, texts: list[str]) -> object:
    from tokenizers import AddedToken, Tokenizer, decoders, models, pre_tokenizers, processors, trainers
    from transformers import PreTrainedTokenizerFast

    tk = Tokenizer(models.BPE())
    tk.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tk.decoder = decoders.ByteLevel()
    byte_post = processors.ByteLevel(add_prefix_space=False, trim_offsets=False)

    if spec.family == "qwen3":
        # Qwen keeps its special tokens after the BPE vocab, so reserve room for them.
        n_added = len(_QWEN3_SPECIALS) + len(_QWEN3_PLAIN_ADDED)
        trainer = trainers.BpeTrainer(vocab_size=spec.vocab_size - n_added, show_progress=False,
                                      initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
        tk.train_from_iterator(texts, trainer=trainer)
        tk.add_special_tokens([AddedToken(t, special=True, normalized=False) for t in _QWEN3_SPECIALS])
        tk.add_tokens([AddedToken(t, special=False, normalized=False) for t in _QWEN3_PLAIN_ADDED])
        tk.post_processor = byte_post  # no BOS: Qwen adds nothing around the text
        return PreTrainedTokenizerFast(
            tokenizer_object=tk, eos_token="<|im_end|>", pad_token="<|endoftext|>",
            extra_special_tokens=["<|im_start|>"],
            model_max_length=spec.max_position_embeddings, clean_up_tokenization_spaces=False,
            chat_template=CHAT_TEMPLATES["qwen3"],
        )

    # Gemma keeps its special tokens at the start of the vocab (pad=0, eos=1, bos=2, ...).
    trainer = trainers.BpeTrainer(vocab_size=spec.vocab_size, show_progress=False,
                                  special_tokens=[AddedToken(t, special=True, normalized=False)
                                                  for t in _GEMMA3_SPECIALS],
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tk.train_from_iterator(texts, trainer=trainer)
    bos_id = tk.token_to_id("<bos>")
    # Like Gemma, encode(..., add_special_tokens=True) prepends <bos>.
    tk.post_processor = processors.Sequence([
        byte_post,
        processors.TemplateProcessing(single="<bos> $A", pair="<bos> $A $B:1",
                                      special_tokens=[("<bos>", bos_id)]),
    ])
    return PreTrainedTokenizerFast(
        tokenizer_object=tk, bos_token="<bos>", eos_token="<eos>", pad_token="<pad>",
        unk_token="<unk>", extra_special_tokens=_GEMMA3_SPECIALS[4:],
        model_max_length=spec.max_position_embeddings, clean_up_tokenization_spaces=False,
        chat_template=CHAT_TEMPLATES["gemma3"],
    )
