"""One layer's self-attention keys and values, stored with room to grow (decoding speed).

Decoding appends one position per step. Concatenating would copy all L cached positions at
every step (O(L²) over a sentence); a buffer with spare capacity takes the new position in
place, and grows by doubling when full.

Shapes: B batch, H heads, L filled positions, C capacity ≥ L, Dh head dim.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch
from torch import Tensor

MIN_CAPACITY = 16


@dataclass(frozen=True)
class KeyValueBuffer:
    """Keys and values of L positions, the first L of buffers with capacity C.

    A value like any other: ``extended`` and ``select`` return new buffers and never change
    what an existing one holds. Extending writes in place only when nothing has been written
    past ``length`` yet (the usual chain of decoding steps); extending the same buffer a
    second time, e.g. to branch, copies instead.
    """

    keys_buffer: Tensor  # (B, H, C, Dh)
    values_buffer: Tensor  # (B, H, C, Dh)
    length: int
    _filled: list[int] = field(repr=False, compare=False)  # shared by every view of the buffers

    @classmethod
    def wrap(cls, keys: Tensor, values: Tensor) -> KeyValueBuffer:
        """Full buffers (C = L) around (B, H, L, Dh) keys and values, without copying."""
        length = keys.size(2)
        return cls(keys, values, length, [length])

    @property
    def keys(self) -> Tensor:
        return self.keys_buffer[:, :, : self.length]  # (B, H, L, Dh)

    @property
    def values(self) -> Tensor:
        return self.values_buffer[:, :, : self.length]  # (B, H, L, Dh)

    @property
    def capacity(self) -> int:
        return self.keys_buffer.size(2)

    def extended(self, keys: Tensor, values: Tensor) -> KeyValueBuffer:
        """These L positions followed by T new ones, (B, H, T, Dh) each."""
        end = self.length + keys.size(2)
        if end <= self.capacity and self._filled[0] == self.length:
            k_buf, v_buf, filled = self.keys_buffer, self.values_buffer, self._filled
        else:
            capacity = max(2 * end, MIN_CAPACITY)
            k_buf, v_buf = self._grown(self.keys, capacity), self._grown(self.values, capacity)
            filled = [self.length]
        k_buf[:, :, self.length : end] = keys
        v_buf[:, :, self.length : end] = values
        filled[0] = end
        return KeyValueBuffer(k_buf, v_buf, end, filled)

    def select(self, index: Tensor) -> KeyValueBuffer:
        """Rows ``index`` (B',) of the batch, in new buffers of the same capacity."""
        k_buf = self._empty_like(len(index), self.capacity)
        v_buf = self._empty_like(len(index), self.capacity)
        torch.index_select(self.keys, 0, index, out=k_buf[:, :, : self.length])
        torch.index_select(self.values, 0, index, out=v_buf[:, :, : self.length])
        return KeyValueBuffer(k_buf, v_buf, self.length, [self.length])

    def _grown(self, filled: Tensor, capacity: int) -> Tensor:
        """A new (B, H, capacity, Dh) buffer starting with the L ``filled`` positions."""
        buf = self._empty_like(filled.size(0), capacity)
        buf[:, :, : self.length] = filled
        return buf

    def _empty_like(self, batch: int, capacity: int) -> Tensor:
        _, h, _, dh = self.keys_buffer.shape
        return self.keys_buffer.new_empty(batch, h, capacity, dh)
