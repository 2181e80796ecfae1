"""Where the decoder layers live in each supported architecture, plain or peft-wrapped."""

from __future__ import annotations

import torch

DECODER_LAYERS_PATH: dict[str, str] = {
    "qwen3": "model.layers",
    "gemma3": "model.language_model.layers",
}


def get_decoder_layers(model: torch.nn.Module) -> torch.nn.ModuleList:
    """Return the decoder-layer ModuleList of a plain or peft-wrapped Qwen3 / Gemma 3 model."""
    base = model
    # PeftModel (and LoraModel) expose the wrapped transformers model via get_base_model().
    while hasattr(base, "get_base_model") and base.get_base_model() is not base:
        base = base.get_base_model()
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
            return obj
    raise AttributeError(f"cannot find decoder layers on {type(base).__name__} (tried {candidates})")
