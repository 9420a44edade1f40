"""The decoder's key/value cache: an explicit value, passed in and returned (§3.2.3 at inference).

Shapes: B batch (sentences × beams), H heads, L cached length, S source length, Dh head dim.
"""

from __future__ import annotations

from dataclasses import dataclass

from torch import Tensor

from aiayn.modules.attention import KeyValue
from aiayn.modules.kv_buffer import KeyValueBuffer


@dataclass(frozen=True)
class KVCache:
    """Keys and values the decoder has already computed.

    Attributes:
        self_attn: per decoder layer, self-attention keys and values (B, H, L, Dh), or
            None before the first step.
        cross_attn: per decoder layer, encoder–decoder keys and values (B, H, S, Dh),
            computed once from the encoder output; empty for a decoder-only model.
        length: L, the number of target positions already decoded; the next token's
            position is ``length``.
    """

    self_attn: tuple[KeyValueBuffer | None, ...]
    cross_attn: tuple[KeyValue, ...]
    length: int = 0

    @classmethod
    def empty(cls, n_layers: int, cross_attn: tuple[KeyValue, ...] = ()) -> KVCache:
        return cls(self_attn=(None,) * n_layers, cross_attn=cross_attn, length=0)

    def advanced(self, self_attn: tuple[KeyValueBuffer, ...], steps: int) -> KVCache:
        """The cache after ``steps`` more positions, with the layers' extended keys/values."""
        return KVCache(self_attn=self_attn, cross_attn=self.cross_attn, length=self.length + steps)

    def reorder(self, index: Tensor, *, memory_index: Tensor | None = None) -> KVCache:
        """Select batch rows, e.g. the surviving beams: row i of the result is row index[i].

        Self-attention rows are gathered by the next step, as it copies the cache anyway
        (see ``KeyValueBuffer``). Encoder–decoder keys/values are held once per sentence and
        shared by its beams (see ``CrossAttention``), so beams reselected within their
        sentences leave them alone; ``memory_index`` selects sentences among them (e.g. to
        drop finished ones).
        """

        def pick(kv: KeyValue, rows: Tensor) -> KeyValue:
            return kv[0].index_select(0, rows), kv[1].index_select(0, rows)

        return KVCache(
            self_attn=tuple(None if kv is None else kv.select(index) for kv in self.self_attn),
            cross_attn=(
                self.cross_attn
                if memory_index is None
                else tuple(pick(kv, memory_index) for kv in self.cross_attn)
            ),
            length=self.length,
        )
