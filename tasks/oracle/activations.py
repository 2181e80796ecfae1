"""The target prompts' activations the oracle reads (``task.activations``): extracted (through the disk cache),
keyed by ``activation_id``, and centred on the training mean when ``task.activations.center`` asks."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import torch

from ao_calib.steering.activations import ActivationCache, ExtractionStats, extract_activations

from .config import OracleActivationsConfig
from .rows.oracle import activation_id
from .steering import position_rule

Vectors = dict[int, torch.Tensor]  # one prompt's (K, d) vectors per layer


@dataclass
class Extractor:
    """Extracts prompts' activations at ``layers``, less ``center`` (the training mean per layer, empty: none);
    ``stats`` counts the texts and cache hits of every call."""

    layers: list[int]
    settings: OracleActivationsConfig
    cache_dir: str
    hub_id: str
    center: dict[int, torch.Tensor] = field(default_factory=dict)
    stats: ExtractionStats = field(default_factory=ExtractionStats)

    def __call__(self, prompts: set[str], model, tokenizer) -> dict[str, Vectors]:
        model_id = f"{model.config._name_or_path or self.hub_id}:{model.dtype}"
        cache = ActivationCache(Path(self.cache_dir) / "activations", model_id) if self.settings.cache else None
        ordered = sorted(prompts)
        acts = extract_activations(model, tokenizer, ordered, self.layers, position_rule(self.settings),
                                   batch_size=self.settings.batch_size, cache=cache, stats=self.stats)
        return {activation_id(p): centered(a, self.center) for p, a in zip(ordered, acts)}


def training_mean(store: dict[str, Vectors], train_rows: list[dict], layers: list[int]) -> dict[int, torch.Tensor]:
    """The mean over the training prompts' vectors, per layer (the training split only)."""
    train_ids = {activation_id(r["prompt"]) for r in train_rows}
    return {layer: torch.cat([store[aid][layer].float() for aid in train_ids]).mean(0) for layer in layers}


def centered(vectors: Vectors, center: dict[int, torch.Tensor]) -> Vectors:
    """``vectors`` less the training mean of their layer (``task.activations.center``); as they are without it."""
    if not center:
        return vectors
    return {layer: (v.float() - center[layer]).to(v.dtype) for layer, v in vectors.items()}
