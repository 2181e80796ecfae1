"""Keys and values kept between the turns of an evaluation's episodes. A turn's prompt is the conversation so far,
and most of it (the system turn, the earlier requests, calls and results) went through the model at the turn before:
each row reuses the cache of the tokens it shares with what the model read and wrote last time, and prefills only
what came since (tool results, the next request). Reused tokens stop where the new prompt first differs from them
(a re-rendered message), so every reused key is the one a whole prefill computes."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch
from transformers import DynamicCache

from ao_calib.models.fast_generation import left_pad


@dataclass(eq=False)  # an entry is itself: its tensors are not compared
class _Entry:
    ids: torch.Tensor  # (T,) the tokens the model read and wrote at a row's last turn (on the CPU: compared there)
    keys: list[torch.Tensor]  # per layer (heads, T, head_dim)
    values: list[torch.Tensor]

    @property
    def nbytes(self) -> int:
        return sum(t.nbytes for t in (*self.keys, *self.values))


class TurnCache:
    """The rows' caches of one evaluation's episodes, at most ``max_bytes`` of keys and values (the oldest dropped
    first: a finished episode's is never asked for again)."""

    def __init__(self, max_bytes: int):
        self.max_bytes = max_bytes
        self.entries: list[_Entry] = []

    @property
    def nbytes(self) -> int:
        return sum(entry.nbytes for entry in self.entries)

    def take(self, ids: Sequence[int]) -> tuple[_Entry | None, int]:
        """The kept entry that starts like ``ids`` for longest, removed from the cache, and how many of its tokens
        ``ids`` can reuse (all but ``ids``' last token at most: its logits come from its own pass)."""
        best, reused, wanted = None, 0, torch.tensor(ids)
        for entry in self.entries:
            n = min(len(entry.ids), len(ids) - 1)
            if n <= reused:
                continue
            same = entry.ids[:n] == wanted[:n]
            shared = int(same.cumprod(0).sum())
            if shared > reused:
                best, reused = entry, shared
        if best is not None:
            self.entries.remove(best)
        return best, reused

    def keep(self, entry: _Entry) -> None:
        size = entry.nbytes
        if size > self.max_bytes:
            return
        while self.entries and self.nbytes + size > self.max_bytes:
            self.entries.pop(0)
        self.entries.append(entry)


def batch_from_turn_cache(rows: Sequence[Sequence[int]], found: Sequence[tuple[_Entry | None, int]], config,
                          pad_id: int, device) -> tuple[torch.Tensor, torch.Tensor, DynamicCache]:
    """Ids, attention mask and cache laid out as [padding][each row's reused tokens][padding][its new tokens], the
    cache holding the reused tokens' keys and values (zeros under padding, which the mask hides)."""
    width = max(n for _, n in found)
    like = next(entry for entry, n in found if n)  # stands in for a row with nothing reused: all its keys padding

    def padded(per_row: list[torch.Tensor]) -> torch.Tensor:
        return torch.stack([torch.nn.functional.pad(t[:, :n], (0, 0, width - n, 0))
                            for t, (_, n) in zip(per_row, found, strict=True)])

    cache = DynamicCache(config=config)
    for layer in range(len(like.keys)):
        cache.update(padded([(entry or like).keys[layer] for entry, _ in found]),
                     padded([(entry or like).values[layer] for entry, _ in found]), layer)
    head, head_mask = left_pad([row[:n] for row, (_, n) in zip(rows, found, strict=True)], pad_id, device)
    tail, tail_mask = left_pad([row[n:] for row, (_, n) in zip(rows, found, strict=True)], pad_id, device)
    return torch.cat([head, tail], dim=1), torch.cat([head_mask, tail_mask], dim=1), cache


def entries_after(cache: DynamicCache, sequences: torch.Tensor, mask: torch.Tensor) -> list[_Entry]:
    """Each row's entry after ``generate``: the tokens of ``sequences`` (prompt and completion) that the cache holds
    and the mask keeps, with their keys and values."""
    held = cache.get_seq_length()
    full_mask = torch.cat([mask, mask.new_ones(mask.size(0), sequences.size(1) - mask.size(1))], dim=1)[:, :held]
    entries = []
    for i in range(sequences.size(0)):
        where = full_mask[i].bool().nonzero().squeeze(1)
        entries.append(_Entry(sequences[i, :held][where].cpu(),
                              [layer.keys[i].index_select(1, where) for layer in cache.layers],
                              [layer.values[i].index_select(1, where) for layer in cache.layers]))
    return entries
