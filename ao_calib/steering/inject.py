"""Activation injection for Activation Oracles: norm-matched steering at the output of one decoder layer.

At each placeholder position p of row b, with h the residual stream leaving decoder layer ``layer`` and v the
injected activation:

    add:     h' = h + c·‖h‖·v/‖v‖
    replace: h' =     c·‖h‖·v/‖v‖

Injection happens only in passes that see the prompt (prefill and full-sequence passes); cached decode steps,
which carry one new token, pass through untouched.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass
from typing import Protocol

import torch
import torch.nn.functional as F

from ao_calib.steering.layout import get_decoder_layers, unwrap

MODES = ("add", "replace")


class SteeringError(RuntimeError):
    """The injection does not line up with the forward pass (row count, positions, or placeholder tokens)."""


@dataclass
class SteeringBatch:
    """Vectors and absolute positions for every row of a (padded) batch: ``vectors`` (B, K, d) and
    ``positions`` (B, K), with ``-1`` marking padding where a row has fewer than K vectors."""

    vectors: torch.Tensor
    positions: torch.Tensor

    @classmethod
    def from_rows(cls, vectors: Sequence[torch.Tensor], positions: Sequence[Sequence[int] | torch.Tensor]
                  ) -> SteeringBatch:
        if len(vectors) != len(positions):
            raise SteeringError(f"{len(vectors)} rows of vectors but {len(positions)} rows of positions")
        k_max = max((len(p) for p in positions), default=0)
        dim = vectors[0].shape[-1] if len(vectors) else 0
        vec = torch.zeros(len(vectors), k_max, dim, dtype=torch.float32)
        pos = torch.full((len(vectors), k_max), -1, dtype=torch.long)
        for b, (v, p) in enumerate(zip(vectors, positions)):
            p = torch.as_tensor(p, dtype=torch.long)
            if v.ndim != 2 or v.shape[0] != len(p):
                raise SteeringError(f"row {b}: {tuple(v.shape)} vectors for {len(p)} positions")
            vec[b, : len(p)] = v.float()
            pos[b, : len(p)] = p
        return cls(vec, pos)

    def __len__(self) -> int:
        return self.positions.shape[0]

    def rows(self, start: int, end: int) -> SteeringBatch:
        return SteeringBatch(self.vectors[start:end], self.positions[start:end])


class Steering(Protocol):
    """What trainers and evaluation need from a task that injects activations (the oracle's
    ``ActivationSteering`` is one): the vectors for a batch of rows placed on its token ids, and a context that
    steers the model with them."""

    def batch_for(self, rows: Sequence[dict], input_ids: torch.Tensor, condition: str = "own") -> SteeringBatch:
        """Each row's vectors at the placeholder positions of ``input_ids``: its own (``own``), another prompt's
        (``other``, the control) or vectors that carry nothing (``none``)."""

    def context(self, model: torch.nn.Module, batch: SteeringBatch, kind: str) -> AbstractContextManager:
        """Steers ``model`` with ``batch`` while open; ``kind`` names the pass for counting."""


def apply_steering(hidden: torch.Tensor, batch: SteeringBatch, mode: str, coefficient: float) -> torch.Tensor:
    """The injected residual stream, computed out of place so autograd sees it."""
    valid = batch.positions >= 0
    rows, slots = valid.nonzero(as_tuple=True)
    if rows.numel() == 0:
        return hidden
    rows, slots = rows.to(hidden.device), slots.to(hidden.device)
    cols = batch.positions.to(hidden.device)[rows, slots]
    h = hidden[rows, cols]
    direction = F.normalize(batch.vectors.to(hidden.device)[rows, slots].float(), dim=-1).to(hidden.dtype)
    # As in the reference, the injected term is detached: gradients reach h through the residual path only.
    injected = (coefficient * h.norm(dim=-1, keepdim=True) * direction).detach()
    new = h + injected if mode == "add" else injected
    return hidden.index_put((rows, cols), new)


@contextmanager
def steer(model: torch.nn.Module, vectors: Sequence[torch.Tensor] | SteeringBatch,
          positions: Sequence[Sequence[int]] | None = None, layer: int = 1, mode: str = "add",
          coefficient: float = 1.0, check_token_id: int | None = None, stats: Counter | None = None
          ) -> Iterator[SteeringBatch]:
    """Inject ``vectors[b]`` (K_b, d) at ``positions[b]`` (K_b absolute positions in the padded batch) of every
    row b, at the output of decoder layer ``layer``, in every forward pass that sees the prompt while the context
    is open. With ``check_token_id``, each such pass also verifies that the input token under every injected
    position is that placeholder, and counts the rows checked in ``stats['checked_rows']``."""
    if mode not in MODES:
        raise ValueError(f"steering mode must be one of {MODES}, got {mode!r}")
    batch = vectors if isinstance(vectors, SteeringBatch) else SteeringBatch.from_rows(vectors, positions or [])
    stats = stats if stats is not None else Counter()
    seen_input_ids: list[torch.Tensor | None] = [None]

    def capture_input_ids(_module, args, kwargs):
        ids = kwargs.get("input_ids", args[0] if args else None)
        seen_input_ids[0] = ids if isinstance(ids, torch.Tensor) else None

    def inject(_module, _args, output):
        hidden = output[0] if isinstance(output, tuple) else output
        if hidden.shape[1] == 1:
            return None  # a cached decode step: the prompt is not in this pass
        if hidden.shape[0] != len(batch):
            raise SteeringError(f"steering has {len(batch)} rows but the forward pass has {hidden.shape[0]}")
        if batch.positions.numel() and batch.positions.max() >= hidden.shape[1]:
            raise SteeringError(f"position {int(batch.positions.max())} outside a sequence of {hidden.shape[1]}")
        if check_token_id is not None:
            _check_placeholders(seen_input_ids[0], hidden.shape[:2], batch, check_token_id)
            stats["checked_rows"] += len(batch)
        stats["passes"] += 1
        steered = apply_steering(hidden, batch, mode, coefficient)
        return (steered, *output[1:]) if isinstance(output, tuple) else steered

    target = get_decoder_layers(model)[layer]
    handles = [target.register_forward_hook(inject)]
    if check_token_id is not None:
        handles.append(unwrap(model).register_forward_pre_hook(capture_input_ids, with_kwargs=True))
    recomputes_hooks = _checkpoint_reruns_hooks(target)
    if recomputes_hooks:
        target.gradient_checkpointing = False
    try:
        yield batch
    finally:
        for handle in handles:
            handle.remove()
        if recomputes_hooks:
            target.gradient_checkpointing = True


def _checkpoint_reruns_hooks(layer: torch.nn.Module) -> bool:
    """Whether gradient checkpointing of ``layer`` would re-run its forward hooks in the backward pass.

    transformers before 5.23 checkpoints a decoder layer's whole ``__call__``, hooks included; the backward pass
    usually runs after the ``steer`` block has closed, so the recomputed layer would miss the injection
    (non-reentrant checkpointing raises CheckpointError, reentrant gives wrong gradients). Such a layer is kept out
    of checkpointing while steered: it then stores its activations like an uncheckpointed layer (one layer of
    memory), and every later layer's checkpoint starts from the injected stream. From 5.23 only ``forward`` is
    checkpointed and hooks stay outside the recomputation, so nothing needs changing.
    """
    from transformers.modeling_layers import GradientCheckpointingLayer

    return (isinstance(layer, GradientCheckpointingLayer) and layer.gradient_checkpointing
            and "__call__" in vars(GradientCheckpointingLayer))


def _check_placeholders(input_ids: torch.Tensor | None, shape, batch: SteeringBatch, token_id: int) -> None:
    if input_ids is None or tuple(input_ids.shape) != tuple(shape):
        raise SteeringError("cannot check placeholders: the pass's input_ids were not seen")
    valid = batch.positions >= 0
    rows, slots = valid.nonzero(as_tuple=True)
    tokens = input_ids[rows.to(input_ids.device), batch.positions[rows, slots].to(input_ids.device)]
    if not bool((tokens == token_id).all()):
        bad = int(rows[(tokens != token_id).cpu()][0])
        raise SteeringError(f"row {bad}: injected positions {batch.positions[bad].tolist()} do not hold the "
                            f"placeholder token {token_id} (found {input_ids[bad].tolist()})")

