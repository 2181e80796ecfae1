"""Where the decoder layers live in each supported architecture, plain or peft-wrapped."""

from __future__ import annotations

import torch

DECODER_LAYERS_PATH: dict[str, str] = {
    "qwen3": "model.layers",
    "gemma3": "model.language_model.layers",
}


def unwrap(model: torch.nn.Module) -> torch.nn.Module:
    """The transformers model inside any process wrapper (DDP, DeepSpeed's engine: accelerate knows them all) and
    any peft wrapping (PeftModel and LoraModel expose it via get_base_model)."""
    from accelerate.utils import extract_model_from_parallel

    model = extract_model_from_parallel(model, keep_fp32_wrapper=True)
    while hasattr(model, "get_base_model") and model.get_base_model() is not model:
        model = model.get_base_model()
    return model


def decoder_layers_path(model: torch.nn.Module) -> str:
    """The dotted path from the unwrapped model to its decoder-layer ModuleList (e.g. ``model.layers``)."""
    base = unwrap(model)
    model_type = getattr(getattr(base, "config", None), "model_type", None)
    candidates = [DECODER_LAYERS_PATH[model_type]] if model_type in DECODER_LAYERS_PATH else []
    # Fallbacks cover text-only variants (e.g. gemma3_text -> Gemma3ForCausalLM) and other archs.
    candidates += [p for p in ("model.layers", "model.language_model.layers") if p not in candidates]
    for path in candidates:
        obj: object = base
        for attr in path.split("."):
            obj = getattr(obj, attr, None)
            if obj is None:
                break
        if isinstance(obj, torch.nn.ModuleList):
            return path
    raise AttributeError(f"cannot find decoder layers on {type(base).__name__} (tried {candidates})")


def get_decoder_layers(model: torch.nn.Module) -> torch.nn.ModuleList:
    """The decoder-layer ModuleList of a plain or peft-wrapped Qwen3 / Gemma 3 model."""
    obj = unwrap(model)
    for attr in decoder_layers_path(model).split("."):
        obj = getattr(obj, attr)
    return obj
