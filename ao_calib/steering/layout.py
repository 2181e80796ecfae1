"""Where a model's decoder layers live, plain or wrapped, found the way transformers finds its decoder.

``get_decoder()`` is transformers' own lookup of the text decoder (``self.model`` of a ``*ForCausalLM``, the
``language_model`` of a multimodal model such as Gemma 3's); its ``layers`` is the decoder-layer ModuleList for
every decoder-only architecture that follows the library's layout (Llama, Qwen, Gemma, Mistral, ...). A model that
does not is refused with one message naming its class.
"""

from __future__ import annotations

import torch


class UnsupportedLayoutError(AttributeError):
    """The model's decoder layers cannot be found: injection, extraction and LoRA placement need them."""


def unwrap(model: torch.nn.Module) -> torch.nn.Module:
    """The transformers model inside any process wrapper (DDP, DeepSpeed's engine: accelerate knows them all) and
    any peft wrapping (PeftModel and LoraModel expose it via get_base_model)."""
    from accelerate.utils import extract_model_from_parallel

    model = extract_model_from_parallel(model, keep_fp32_wrapper=True)
    while hasattr(model, "get_base_model") and model.get_base_model() is not model:
        model = model.get_base_model()
    return model


def _num_layers(base: torch.nn.Module) -> int | None:
    config = getattr(base, "config", None)
    if config is None:
        return None
    text = config.get_text_config() if hasattr(config, "get_text_config") else config
    return getattr(text, "num_hidden_layers", None)


def get_decoder_layers(model: torch.nn.Module) -> torch.nn.ModuleList:
    """The decoder-layer ModuleList of a plain or wrapped model."""
    base = unwrap(model)
    decoder = base.get_decoder() if hasattr(base, "get_decoder") else None
    layers = getattr(decoder, "layers", None)
    expected = _num_layers(base)
    if not isinstance(layers, torch.nn.ModuleList) or (expected is not None and len(layers) != expected):
        found = "no ModuleList" if not isinstance(layers, torch.nn.ModuleList) else f"{len(layers)} modules"
        raise UnsupportedLayoutError(
            f"cannot find the decoder layers of {type(base).__name__}: ao_calib reads them as get_decoder().layers "
            f"(found {found}, config says {expected} layers); injection, extraction and LoRA placement need them")
    return layers


def decoder_layers_path(model: torch.nn.Module) -> str:
    """The dotted path from the unwrapped model to its decoder-layer ModuleList (e.g. ``model.layers``)."""
    base = unwrap(model)
    layers = get_decoder_layers(base)
    return next(name for name, module in base.named_modules() if module is layers)
