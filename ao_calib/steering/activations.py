"""Residual-stream activations of target prompts: extraction from the base model and an on-disk cache.

An activation at layer k is the output of decoder block k. Extraction runs the base model with any adapter
disabled and, on a whole model, stops the forward pass right after the deepest layer it needs.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import os
import random
import tempfile
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

import torch
from safetensors import SafetensorError
from safetensors.torch import load_file, save_file

from ao_calib.runtime import distributed
from ao_calib.steering.layout import get_decoder_layers

log = logging.getLogger(__name__)
POSITION_RULES = ("last_k", "window", "full")


def layer_indices(num_hidden_layers: int, layer_percents: Sequence[int]) -> list[int]:
    """``int(num_hidden_layers * pct / 100)`` per percent: Qwen3-8B (36 layers) at 25/50/75 -> 9, 18, 27."""
    return [int(num_hidden_layers * pct / 100) for pct in layer_percents]


@dataclass(frozen=True)
class PositionRule:
    """Which token positions of the target prompt to keep: the last ``k``, a random window of ``window_min`` to
    ``window_max`` tokens (seeded by the text, so it is the same on every run), or every token; never one of the
    first ``skip_first`` tokens."""

    kind: str = "last_k"
    k: int = 10
    window_min: int = 1
    window_max: int = 10
    seed: int = 0
    skip_first: int = 0

    def __post_init__(self):
        if self.kind not in POSITION_RULES:
            raise ValueError(f"position rule must be one of {POSITION_RULES}, got {self.kind!r}")

    def select(self, n_tokens: int, text: str) -> list[int]:
        first = self.skip_first
        if n_tokens <= first:
            raise ValueError(f"a target text of {n_tokens} tokens has none after the first skip_first={first}: "
                             f"{text[:80]!r}")
        if self.kind == "full":
            return list(range(first, n_tokens))
        if self.kind == "last_k":
            return list(range(max(first, n_tokens - self.k), n_tokens))
        rng = random.Random(f"{self.seed}:{text}")
        length = min(n_tokens - first, rng.randint(self.window_min, self.window_max))
        start = rng.randint(first, n_tokens - length)
        return list(range(start, start + length))


def target_text(tokenizer, prompt: str, chat_template_kwargs: dict | None = None) -> str:
    """The user prompt as one user turn of the model's chat template, without a generation prompt."""
    return tokenizer.apply_chat_template([{"role": "user", "content": prompt}], tokenize=False,
                                         add_generation_prompt=False, **(chat_template_kwargs or {}))


class ActivationCache:
    """safetensors files keyed by (model, text, layers, position rule). A file is written under a temporary name
    and renamed into place, so a reader only ever sees complete files; an unreadable file counts as a miss."""

    def __init__(self, root: str | Path, model_id: str):
        self.root = Path(root)
        self.model_id = model_id
        self.hits = 0
        self.misses = 0

    def key(self, text: str, layers: Sequence[int], rule: PositionRule) -> str:
        blob = json.dumps({"model": self.model_id, "text": text, "layers": list(layers), "rule": asdict(rule)},
                          sort_keys=True)
        return hashlib.sha256(blob.encode()).hexdigest()

    def _path(self, key: str) -> Path:
        return self.root / key[:2] / f"{key}.safetensors"

    def get(self, key: str) -> dict[int, torch.Tensor] | None:
        path = self._path(key)
        try:
            tensors = load_file(path)
        except (FileNotFoundError, SafetensorError, OSError):
            self.misses += 1
            return None
        self.hits += 1
        return {int(name.split("_")[1]): t for name, t in tensors.items()}

    def put(self, key: str, activations: dict[int, torch.Tensor]) -> None:
        path = self._path(key)
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{key}.", suffix=".tmp")
        os.close(fd)
        try:
            save_file({f"layer_{k}": v.contiguous() for k, v in activations.items()}, tmp)
            os.replace(tmp, path)
        finally:
            Path(tmp).unlink(missing_ok=True)


class _Stop(Exception):
    """Raised by the hook on the deepest needed layer: the rest of the forward pass is not needed."""


@dataclass
class ExtractionStats:
    forward_passes: int = 0
    cache_hits: int = 0
    texts: int = 0


@torch.no_grad()
def extract_activations(model, tokenizer, prompts: Sequence[str], layers: Sequence[int], rule: PositionRule,
                        *, batch_size: int = 8, cache: ActivationCache | None = None,
                        chat_template_kwargs: dict | None = None, stats: ExtractionStats | None = None
                        ) -> list[dict[int, torch.Tensor]]:
    """For each prompt, ``{layer: (K, d) tensor}`` at the rule's positions of its templated text."""
    stats = stats if stats is not None else ExtractionStats()
    texts = [target_text(tokenizer, p, chat_template_kwargs) for p in prompts]
    results: list[dict[int, torch.Tensor] | None] = [None] * len(texts)
    keys = [cache.key(t, layers, rule) for t in texts] if cache else [None] * len(texts)
    if cache:
        for i, key in enumerate(keys):
            results[i] = cache.get(key)
    # Every process runs the same list: the prompts any of them missed (a file one process could not read is run
    # for all). Each prompt is run by one process (evenly padded shares when the model is sharded, whose forward
    # pass is a collective) and every process receives all of them.
    misses = [i for i, r in enumerate(results) if r is None]
    todo = sorted(set().union(*distributed.all_gather(misses)))
    stats.texts += len(texts)
    stats.cache_hits += len(texts) - len(todo)

    def run(indices: list[int]) -> list[dict[int, torch.Tensor]]:
        """The activations of the texts at ``indices``, in forward passes of ``batch_size``."""
        out = []
        for start in range(0, len(indices), batch_size):
            chunk = indices[start : start + batch_size]
            stats.forward_passes += 1
            out += _forward_layers(model, tokenizer, [texts[i] for i in chunk], layers, rule)
        return out

    computed = distributed.map_split(run, todo)
    for i, acts in zip(todo, computed):
        results[i] = acts
    if cache and distributed.is_main():
        # Written once, by the main process, from the gathered values every process now holds alike.
        for i, acts in zip(todo, computed):
            cache.put(keys[i], acts)
    return results  # type: ignore[return-value]


def _forward_layers(model, tokenizer, texts: list[str], layers: Sequence[int], rule: PositionRule
                    ) -> list[dict[int, torch.Tensor]]:
    # Right padding: with causal attention, each row's real tokens never see the padding after them.
    enc = tokenizer(texts, return_tensors="pt", padding=True, padding_side="right", add_special_tokens=False)
    device = next(model.parameters()).device
    decoder_layers = get_decoder_layers(model)
    captured: dict[int, torch.Tensor] = {}
    deepest = max(layers)
    # A sharded model's pass runs to its end: FSDP2 closes each pass in the root module's post-forward hook, which
    # an exception would skip (leaving the root mid-pass for whatever runs next).
    stop_early = not distributed.sharded()

    def capture(index):
        def hook(_module, _args, output):
            captured[index] = (output[0] if isinstance(output, tuple) else output).detach()
            if index == deepest and stop_early:
                raise _Stop
        return hook

    handles = [decoder_layers[k].register_forward_hook(capture(k)) for k in sorted(set(layers))]
    disable = model.disable_adapter() if hasattr(model, "disable_adapter") else contextlib.nullcontext()
    was_training = model.training
    model.eval()
    try:
        with disable:
            model(input_ids=enc["input_ids"].to(device), attention_mask=enc["attention_mask"].to(device))
    except _Stop:
        pass
    finally:
        for handle in handles:
            handle.remove()
        model.train(was_training)
    lengths = enc["attention_mask"].sum(dim=1).tolist()
    out = []
    for row, (text, n) in enumerate(zip(texts, lengths)):
        pos = torch.tensor(rule.select(int(n), text))
        out.append({k: captured[k][row, pos].to("cpu").clone() for k in layers})
    return out
