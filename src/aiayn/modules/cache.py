"""The decoder's key/value cache: an explicit value, passed in and returned (§3.2.3 at inference).

This is the plain reference: self-attention keys/values grow by ``torch.cat``, and every
decoder row has its own copy of the encoder–decoder keys/values. ``aiayn.accel`` holds
faster stores with the same interface (a growing contiguous buffer; memory shared by the
beams of a sentence).

Shapes: B rows (sentences, or sentences × beams), H heads, L cached length, S source
length, Dh head dim.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import NamedTuple, Protocol

import torch
from torch import Tensor


class KeyValues(Protocol):
    """One layer's self-attention keys and values of L positions, as an immutable value."""

    keys: Tensor  # (B, H, L, Dh)
    values: Tensor  # (B, H, L, Dh)

    def extended(self, keys: Tensor, values: Tensor) -> KeyValues:
        """These L positions followed by T new ones, (B, H, T, Dh) each."""
        ...

    def select(self, index: Tensor) -> KeyValues:
        """Rows ``index`` (B',): row i of the result is row ``index[i]``."""
        ...


@dataclass(frozen=True)
class ConcatKeyValues:
    """The reference store: the cached tensors, extended with ``torch.cat``."""

    keys: Tensor | None = None  # (B, H, L, Dh); None before the first position
    values: Tensor | None = None  # (B, H, L, Dh)

    def extended(self, keys: Tensor, values: Tensor) -> ConcatKeyValues:
        if self.keys is None or self.values is None:
            return ConcatKeyValues(keys, values)
        return ConcatKeyValues(torch.cat([self.keys, keys], 2), torch.cat([self.values, values], 2))

    def select(self, index: Tensor) -> ConcatKeyValues:
        if self.keys is None or self.values is None:
            return self
        return ConcatKeyValues(self.keys.index_select(0, index), self.values.index_select(0, index))


class MemoryKeyValues(NamedTuple):
    """One layer's encoder–decoder keys and values, (B, H, S, Dh) each: one row per
    decoder row."""

    keys: Tensor
    values: Tensor

    def select(self, index: Tensor) -> MemoryKeyValues:
        return MemoryKeyValues(self.keys.index_select(0, index), self.values.index_select(0, index))


@dataclass(frozen=True)
class KVCache:
    """Keys and values the decoder has already computed.

    Attributes:
        self_attn: per decoder layer, the self-attention keys and values of the L positions
            decoded so far.
        memory: per decoder layer, encoder–decoder keys and values, computed once from the
            encoder output; empty for a decoder-only model.
        length: L, the number of target positions already decoded; the next token's
            position is ``length``.
    """

    self_attn: tuple[KeyValues, ...]
    memory: tuple[MemoryKeyValues, ...] = ()
    length: int = 0

    @classmethod
    def empty(
        cls,
        n_layers: int,
        memory: tuple[MemoryKeyValues, ...] = (),
        *,
        store: type = ConcatKeyValues,
    ) -> KVCache:
        """A cache of no position; ``store`` is the class of each layer's keys/values."""
        return cls(self_attn=tuple(store() for _ in range(n_layers)), memory=memory)

    def advanced(self, self_attn: tuple[KeyValues, ...], steps: int) -> KVCache:
        """The cache after ``steps`` more positions, with the layers' extended keys/values."""
        return replace(self, self_attn=self_attn, length=self.length + steps)

    def reorder(self, index: Tensor) -> KVCache:
        """Select rows, e.g. the surviving beams: row i of the result is row ``index[i]``,
        in every layer's self-attention and encoder–decoder keys/values alike."""
        return replace(
            self,
            self_attn=tuple(kv.select(index) for kv in self.self_attn),
            memory=tuple(kv.select(index) for kv in self.memory),
        )
