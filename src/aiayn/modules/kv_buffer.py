"""One layer's self-attention keys and values, stored with room to grow (decoding speed).

Decoding appends one position per step. Concatenating would copy all L cached positions at
every step (O(L²) over a sentence); a buffer with spare capacity takes the new position in
place, and grows by doubling when full. Beam search reorders rows at every step; the latest
buffer moves only the rows that change, in place, instead of copying the whole cache.

Shapes: B batch, H heads, L filled positions, C capacity ≥ L, Dh head dim.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch
from torch import Tensor

MIN_CAPACITY = 16


@dataclass
class _Storage:
    """What every view of one pair of buffers shares."""

    filled: int  # positions written so far
    version: int = 0  # bumped when rows move in place: views of older versions are stale


class StaleCacheError(RuntimeError):
    """A cache was read after a later reorder moved its rows in place."""


@dataclass(frozen=True)
class KeyValueBuffer:
    """Keys and values of L positions, the first L of buffers with capacity C.

    ``extended`` never changes what an existing buffer holds: it writes in place only past
    ``length`` when nothing has been written there yet (the usual chain of decoding steps);
    extending the same buffer a second time, e.g. to branch, copies instead.

    ``reordered`` consumes the buffer it is called on: rows move in place, and reading the
    old buffer afterwards raises ``StaleCacheError`` rather than returning moved rows.
    """

    keys_buffer: Tensor  # (B, H, C, Dh)
    values_buffer: Tensor  # (B, H, C, Dh)
    length: int
    _storage: _Storage = field(repr=False, compare=False)
    _version: int = field(default=0, repr=False, compare=False)

    @classmethod
    def wrap(cls, keys: Tensor, values: Tensor) -> KeyValueBuffer:
        """Full buffers (C = L) around (B, H, L, Dh) keys and values, without copying."""
        length = keys.size(2)
        return cls(keys, values, length, _Storage(length))

    @property
    def keys(self) -> Tensor:
        self._check_current()
        return self.keys_buffer[:, :, : self.length]  # (B, H, L, Dh)

    @property
    def values(self) -> Tensor:
        self._check_current()
        return self.values_buffer[:, :, : self.length]  # (B, H, L, Dh)

    @property
    def capacity(self) -> int:
        return self.keys_buffer.size(2)

    def extended(self, keys: Tensor, values: Tensor) -> KeyValueBuffer:
        """These L positions followed by T new ones, (B, H, T, Dh) each."""
        self._check_current()
        end = self.length + keys.size(2)
        if end <= self.capacity and self._storage.filled == self.length:
            k_buf, v_buf, storage = self.keys_buffer, self.values_buffer, self._storage
        else:
            capacity = max(2 * end, MIN_CAPACITY)
            k_buf, v_buf = self._grown(self.keys, capacity), self._grown(self.values, capacity)
            storage = _Storage(self.length)
        k_buf[:, :, self.length : end] = keys
        v_buf[:, :, self.length : end] = values
        storage.filled = end
        return KeyValueBuffer(k_buf, v_buf, end, storage, storage.version)

    def select(self, index: Tensor) -> KeyValueBuffer:
        """Rows ``index`` (B',) of the batch, in new buffers of the same capacity."""
        k_buf = self._empty_like(len(index), self.capacity)
        v_buf = self._empty_like(len(index), self.capacity)
        torch.index_select(self.keys, 0, index, out=k_buf[:, :, : self.length])
        torch.index_select(self.values, 0, index, out=v_buf[:, :, : self.length])
        return KeyValueBuffer(k_buf, v_buf, self.length, _Storage(self.length))

    def reordered(self, index: Tensor, moved: Tensor | None) -> KeyValueBuffer:
        """Row i becomes row ``index[i]`` (B,); ``select`` with the batch size kept.

        Args:
            index: (B,) the row each row is taken from.
            moved: (M,) the rows i with index[i] != i, none of which is itself a source
                ``index[j]`` of a moved row j; None when that does not hold.

        With ``moved``, and when this is the latest buffer of its storage, only the moved
        rows are written, in place; otherwise the rows are copied into new buffers.
        """
        self._check_current()
        if moved is None or self._storage.filled != self.length:
            return self.select(index)
        if len(moved) == 0:
            return self
        sources = index.index_select(0, moved)  # (M,)
        for buf in (self.keys_buffer, self.values_buffer):
            filled = buf[:, :, : self.length]  # (B, H, L, Dh)
            filled.index_copy_(0, moved, filled.index_select(0, sources))
        self._storage.version += 1
        return KeyValueBuffer(
            self.keys_buffer, self.values_buffer, self.length, self._storage, self._storage.version
        )

    def _check_current(self) -> None:
        if self._version != self._storage.version:
            raise StaleCacheError(
                "this cache was reordered in place since: use the cache reorder returned"
            )

    def _grown(self, filled: Tensor, capacity: int) -> Tensor:
        """A new (B, H, capacity, Dh) buffer starting with the L ``filled`` positions."""
        buf = self._empty_like(filled.size(0), capacity)
        buf[:, :, : self.length] = filled
        return buf

    def _empty_like(self, batch: int, capacity: int) -> Tensor:
        _, h, _, dh = self.keys_buffer.shape
        return self.keys_buffer.new_empty(batch, h, capacity, dh)
