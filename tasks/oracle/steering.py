"""Which vectors an oracle row injects, and where: the bridge between a task's activations and ``steer``."""

from __future__ import annotations

import hashlib
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field

import torch

from .prompt import find_placeholder_positions
from ao_calib.steering import SteeringBatch, SteeringError, steer
from ao_calib.steering.activations import PositionRule

CONDITIONS = ("own", "other", "none")  # whose activations an evaluation injects: the prompt's, another's, noise


def position_rule(activations) -> PositionRule:
    """The positions ``task.activations`` reads."""
    return PositionRule(activations.positions, k=activations.k, window_min=activations.window_min,
                        window_max=activations.window_max, skip_first=activations.skip_first)


def noise_like(vectors: torch.Tensor, key: str) -> torch.Tensor:
    """Random vectors with the norm of each of ``vectors`` (so an injection of them is as strong as the real one),
    from a generator seeded by ``key``: the same key always gives the same vectors."""
    seed = int(hashlib.sha1(key.encode()).hexdigest()[:15], 16)
    noise = torch.randn(vectors.shape, generator=torch.Generator().manual_seed(seed), dtype=torch.float32)
    scale = vectors.float().norm(dim=-1, keepdim=True) / noise.norm(dim=-1, keepdim=True).clamp_min(1e-12)
    return (noise * scale).to(vectors.dtype)


def pair_controls(rows: list[dict], fallback: list[dict] = ()) -> list[dict]:
    """Sets each row's ``control_activation_id``: another prompt of the same dataset (rows without one form one
    dataset), of another class (``label``) where the dataset has one, taken by a cycle over the dataset's distinct
    prompts in an order keyed by their content hashes. The pairing depends only on which prompts the dataset holds,
    never on what else the activation store holds or in which order rows arrive, so every evaluation of a run (and
    every run on the same data) uses the same control pairs. A dataset with a single prompt cycles over it and the
    ``fallback`` rows' prompts of that dataset (the train split for a one-prompt test split); with none, it has no
    control (None)."""
    label: dict[str, object] = {}
    for row in (*rows, *fallback):
        label.setdefault(row["activation_id"], row.get("label"))
    partner: dict[tuple, str] = {}
    for dataset in {row.get("dataset") for row in rows}:
        ids = {row["activation_id"] for row in rows if row.get("dataset") == dataset}
        if len(ids) < 2:
            ids |= {row["activation_id"] for row in fallback if row.get("dataset") == dataset}
        ids = sorted(ids, key=lambda aid: hashlib.sha1(f"control:{aid}".encode()).hexdigest())
        n = len(ids)
        for i, aid in enumerate(ids if n > 1 else []):
            after = (ids[(i + k) % n] for k in range(1, n))  # the cycle from the next prompt on
            partner[dataset, aid] = next((o for o in after if label[o] != label[aid]), ids[(i + 1) % n])
    return [{**row, "control_activation_id": partner.get((row.get("dataset"), row["activation_id"]))}
            for row in rows]


@dataclass
class ActivationSteering:
    """Read-only map from a row's ``activation_id`` and ``source_layer`` to its (K, d) vectors, plus how to inject.

    Rows name their activations; the vectors themselves are looked up here once per batch and then travel inside
    the batch, so shuffling or splitting a batch cannot pair a row with another row's activations.
    """

    store: dict[str, dict[int, torch.Tensor]]
    placeholder_id: int
    layer: int = 1
    mode: str = "add"
    coefficient: float = 1.0
    stats: Counter = field(default_factory=Counter)

    def vectors(self, rows: Sequence[dict]) -> list[torch.Tensor]:
        return [self.store[row["activation_id"]][int(row["source_layer"])] for row in rows]

    def control_vectors(self, rows: Sequence[dict]) -> list[torch.Tensor]:
        """For each row, the activations of its ``control_activation_id`` (another prompt of its dataset, fixed by
        ``pair_controls``) at the same layer, trimmed or cycled to the row's K: the control in which the oracle
        sees the wrong input."""
        out = []
        for row in rows:
            if not row.get("control_activation_id"):
                raise SteeringError(f"row {row['activation_id']} has no control prompt (its dataset has a single "
                                    "prompt): the control evaluation needs at least two")
            other = self.store[row["control_activation_id"]][int(row["source_layer"])]
            k = len(self.store[row["activation_id"]][int(row["source_layer"])])
            reps = -(-k // len(other))
            out.append(other.repeat(reps, 1)[-k:])
        return out

    def none_vectors(self, rows: Sequence[dict]) -> list[torch.Tensor]:
        """For each row, random vectors with the norms of its own (each position keeps its norm, so the injection
        is as strong as the real one) that carry nothing about any prompt: the ``none`` condition, where no
        oracle can beat chance. Drawn from a generator seeded by the row's activation id and layer, so every
        evaluation of a run, and every run, injects the same vectors for the same row."""
        return [noise_like(self.store[row["activation_id"]][int(row["source_layer"])],
                           f"none:{row['activation_id']}:{row['source_layer']}") for row in rows]

    def condition_vectors(self, rows: Sequence[dict], condition: str = "own") -> list[torch.Tensor]:
        """The vectors a condition injects: ``own`` (the row's prompt), ``other`` (another prompt's, the control)
        or ``none`` (random vectors of the same norms)."""
        if condition not in CONDITIONS:
            raise SteeringError(f"unknown activation condition {condition!r}; one of {', '.join(CONDITIONS)}")
        return {"own": self.vectors, "other": self.control_vectors, "none": self.none_vectors}[condition](rows)

    def batch_for(self, rows: Sequence[dict], input_ids: torch.Tensor, condition: str = "own") -> SteeringBatch:
        """Vectors for ``rows`` (under ``condition``) placed at the placeholder run found in each row of
        ``input_ids``."""
        vectors = self.condition_vectors(rows, condition)
        positions = [find_placeholder_positions(ids.tolist(), self.placeholder_id, len(v))
                     for ids, v in zip(input_ids, vectors)]
        return SteeringBatch.from_rows(vectors, positions)

    def context(self, model, batch: SteeringBatch, kind: str):
        """Steers ``model`` with ``batch``, checking the placeholder under every position and counting passes."""
        self.stats[f"{kind}_batches"] += 1
        return steer(model, batch, layer=self.layer, mode=self.mode, coefficient=self.coefficient,
                     check_token_id=self.placeholder_id, stats=self.stats)
