"""The merged copy generation runs on: a plain transformers model that shares every frozen weight with the trained
(peft) model and owns only its LoRA-targeted weights, refreshed in place from base + scale·B·A (fp32) before each
use, so the trained weights are never merged in place and the copy's tensors keep their addresses. Rollouts
(``ao_calib.models.fast_generation``) and evaluations share one copy per model."""

from __future__ import annotations

import copy

import torch

from ao_calib.steering.layout import unwrap


def _lora_layers(model: torch.nn.Module) -> dict[str, torch.nn.Module]:
    from peft.tuners.lora import LoraLayer

    return {name: module for name, module in model.named_modules() if isinstance(module, LoraLayer)}


QUANTIZED_REFUSAL = ("fast generation cannot run on a quantized (4-bit) model: its merged copy would add float "
                     "LoRA deltas to packed 4-bit weights. Set trainer.fast_generation=false (and "
                     "warmup.fast_generation if set), or model.quantization=null.")


def quantized(model: torch.nn.Module) -> bool:
    """Whether the base weights are quantized (bitsandbytes 4/8-bit, or any transformers quantizer)."""
    base = unwrap(model)
    return bool(getattr(base, "is_loaded_in_4bit", False) or getattr(base, "is_loaded_in_8bit", False)
                or getattr(base, "hf_quantizer", None) is not None
                or getattr(getattr(base, "config", None), "quantization_config", None) is not None)


def mergeable(peft_model: torch.nn.Module) -> str | None:
    """Why the copy cannot be built from this model (None: it can): plain LoRA on linear layers, one adapter."""
    layers = _lora_layers(peft_model)
    if not layers:
        return "the model has no LoRA layers"
    for name, layer in layers.items():
        active = layer.active_adapters
        if len(active) != 1:
            return f"{name} has {len(active)} active adapters"
        adapter = active[0]
        if adapter not in layer.lora_A or not isinstance(layer.get_base_layer(), torch.nn.Linear):
            return f"{name} is not a LoRA linear layer"
        if layer.use_dora.get(adapter) or getattr(layer, "lora_bias", {}).get(adapter):
            return f"{name} uses DoRA or a LoRA bias"
        if getattr(layer, "fan_in_fan_out", False):
            return f"{name} stores its weight transposed (fan_in_fan_out)"
    return None


class MergedCopy:
    """A plain transformers model with the adapter merged, for generation only.

    Frozen parameters are shared with the trained model (no extra memory); each LoRA-targeted linear layer and
    every trainable non-LoRA parameter gets its own tensor, written by ``refresh`` in place:
    W = W_base + scaling·(B @ A), in fp32, then cast once to the copy's dtype. The trained model's weights are
    only read, so 100 or 10,000 refreshes leave them bit-identical.
    """

    def __init__(self, peft_model: torch.nn.Module):
        inner = unwrap(peft_model)
        lora = _lora_layers(inner)
        owned = {id(layer.get_base_layer().weight) for layer in lora.values()}
        memo = {id(p): p for p in inner.parameters() if id(p) not in owned and not p.requires_grad}
        shared = inner.__dict__.get(_SHARED_COPY)
        if shared is not None:
            memo[id(shared)] = None  # another copy held by the model (merged_copy_of) is not copied into this one
        self.model = copy.deepcopy(inner, memo)
        for module in self.model.modules():
            # accelerate (mixed precision) and TRL wrap a model's forward in an instance attribute whose closure
            # holds the trained model's own forward: copied as is, the copy would run the trained model.
            module.__dict__.pop("forward", None)
        # Replace each LoRA wrapper by its base linear layer: the copy runs plain matmuls.
        self._targets: list[tuple[torch.Tensor, torch.nn.Module]] = []
        copied_modules = dict(self.model.named_modules())
        for name, layer in lora.items():
            parent_name, _, child = name.rpartition(".")
            plain = copied_modules[name].get_base_layer()
            setattr(copied_modules[parent_name] if parent_name else self.model, child, plain)
            self._targets.append((plain.weight, layer))
        # Trainable parameters outside LoRA (e.g. peft's modules_to_save) are copied from the trained model.
        trained = dict(inner.named_parameters())
        self._copied: list[tuple[torch.Tensor, torch.Tensor]] = [
            (param, trained[name]) for name, param in self.model.named_parameters()
            if name in trained and trained[name].requires_grad and param is not trained[name]]
        self.model.requires_grad_(False)  # shared parameters are frozen already; the owned ones must not train
        for _, source in self._copied:
            source.requires_grad_(True)
        self.model.eval()
        self.refresh()

    @torch.no_grad()
    def refresh(self) -> None:
        for weight, layer in self._targets:
            adapter = layer.active_adapters[0]
            base = layer.get_base_layer().weight
            a, b = layer.lora_A[adapter].weight, layer.lora_B[adapter].weight
            delta = (b.float() @ a.float()) * layer.scaling[adapter]
            weight.copy_((base.float() + delta).to(weight.dtype))
        for target, source in self._copied:
            target.copy_(source)


_SHARED_COPY = "_ao_calib_merged_copy"


def merged_copy_of(peft_model: torch.nn.Module) -> MergedCopy:
    """The trained model's one merged copy, refreshed from its weights now: rollouts and evaluations share it, so
    its LoRA-targeted weights are held once (a second copy of an 8 B model's projections is 16 GB). It is kept on
    the model as a plain attribute: not a submodule, so never in a state dict, a checkpoint or ``parameters()``."""
    inner = unwrap(peft_model)
    merged = inner.__dict__.get(_SHARED_COPY)
    if merged is None:
        merged = MergedCopy(inner)  # refreshed as it is built
        inner.__dict__[_SHARED_COPY] = merged
    else:
        merged.refresh()
    return merged


def generation_copy_refusal(model: torch.nn.Module) -> str | None:
    """Why an evaluation cannot generate from a merged copy of ``model`` (None: it can)."""
    from ao_calib.runtime import distributed

    if distributed.sharded():
        return "the model is sharded (FSDP/ZeRO): a merged copy would be a full weight copy per rank"
    if quantized(model):
        return "the base weights are quantized"
    return mergeable(unwrap(model))
