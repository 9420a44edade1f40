"""One layer's self-attention keys and values while decoding, laid out for fast attention.

Replaces ``aiayn.modules.cache.ConcatKeyValues`` (same interface: ``keys``, ``values``,
``extended``, ``select``).

Why: each step reads every cached position of every row, so the layout of the cache decides
the speed of attention. On CPU, a step over contiguous (B, H, L, Dh) keys runs 2.5× faster
than over the first L positions of larger buffers when the rows are short (B·H = 1,280 rows
of 20 positions: 0.32 vs 0.83 ms, ``bench/decode.py``). So a short cache is copied at every step
into new contiguous tensors with the new positions at the end; the copy streams through
memory, and it also applies the rows a beam search selected since the last step, which are
only recorded until then (the reference gathers them at once, then concatenates: two
copies). Without a selection, once L reaches ``SPARE_ROOM_FROM`` positions, the copy leaves
room to grow and later steps write their positions in place: copying a long cache at every
step would cost more than it saves.

Shapes: B rows, H heads, L positions, C ≥ L capacity, Dh head dim.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor

SPARE_ROOM_FROM = 128  # from this length on, copies leave room to grow in place


class _Storage:
    """Tensors of capacity C shared by the buffers that view them, and how many positions
    of them have been written (a later buffer may write past that point, never before)."""

    def __init__(self, keys: Tensor, values: Tensor, written: int):
        self.keys = keys  # (B0, H, C, Dh)
        self.values = values  # (B0, H, C, Dh)
        self.written = written


@dataclass(frozen=True)
class KeyValueBuffer:
    """Keys and values of L positions for B rows: the rows ``rows`` of the first L
    positions of a shared storage.

    A value like any other: ``extended`` and ``select`` return new buffers and never change
    what an existing one holds. Extending writes into the storage in place only past
    ``storage.written``, when no other buffer has written there; extending the same buffer
    a second time (to branch) copies.
    """

    storage: _Storage | None = None  # None: no position yet
    length: int = 0
    rows: Tensor | None = None  # (B,) rows of the storage; None: all B0, in order

    @property
    def keys(self) -> Tensor:
        return self._picked(self._stored().keys)  # (B, H, L, Dh)

    @property
    def values(self) -> Tensor:
        return self._picked(self._stored().values)  # (B, H, L, Dh)

    def extended(self, keys: Tensor, values: Tensor) -> KeyValueBuffer:
        """These L positions followed by T new ones, (B, H, T, Dh) each."""
        if self.storage is None:  # the first positions: kept as they are, without a copy
            return KeyValueBuffer(_Storage(keys, values, keys.size(2)), keys.size(2))
        end = self.length + keys.size(2)
        storage = self.storage
        in_place = (
            self.rows is None and end <= storage.keys.size(2) and storage.written == self.length
        )
        if not in_place:
            capacity = 2 * end if self.rows is None and end >= SPARE_ROOM_FROM else end
            storage = _Storage(
                self._copied(storage.keys, capacity),
                self._copied(storage.values, capacity),
                self.length,
            )
        storage.keys[:, :, self.length : end] = keys
        storage.values[:, :, self.length : end] = values
        storage.written = end
        return KeyValueBuffer(storage, end)

    def select(self, index: Tensor) -> KeyValueBuffer:
        """Rows ``index`` (B',) of the batch; recorded now, gathered by the next ``extended``."""
        if self.storage is None:
            return self
        rows = index if self.rows is None else self.rows.index_select(0, index)
        return KeyValueBuffer(self.storage, self.length, rows)

    def _stored(self) -> _Storage:
        if self.storage is None:
            raise ValueError("no position has been cached yet")
        return self.storage

    def _picked(self, stored: Tensor) -> Tensor:
        filled = stored[:, :, : self.length]  # (B0, H, L, Dh)
        return filled if self.rows is None else filled.index_select(0, self.rows)

    def _copied(self, stored: Tensor, capacity: int) -> Tensor:
        """A new contiguous (B, H, capacity, Dh) tensor starting with the selected rows'
        L positions."""
        b = stored.size(0) if self.rows is None else len(self.rows)
        _, h, _, dh = stored.shape
        copy = stored.new_empty(b, h, capacity, dh)
        filled = stored[:, :, : self.length]  # (B0, H, L, Dh)
        if self.rows is None:
            copy[:, :, : self.length] = filled
        else:
            torch.index_select(filled, 0, self.rows, out=copy[:, :, : self.length])
        return copy
