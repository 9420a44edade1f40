"""Encoder–decoder keys/values stored once per sentence and read by all its beams.

Replaces, in beam search, the reference layout where every decoder row (every beam) holds
its own copy of its sentence's memory keys/values (``aiayn.modules.MemoryKeyValues``,
reordered with the beams at every step). ``SharedMemory`` holds one row per sentence, and
``BeamSharedCrossAttention`` (a ``CrossAttention`` with the same weights and signature) lets
the W consecutive decoder rows of a sentence attend to it together.

Why: memory keys/values are then never copied when beams are reselected, and each step
reads them once per sentence instead of once per beam: K·T queries of a sentence share one
attention call (measured here, tiny model, beam 5: the reference stepper is 1.3× slower).

Shapes: B sentences, W decoder rows per sentence (1 at the first step of beam search, then
the beam size), N = B·W rows, H heads, T new positions, S source length, Dh head dim.
"""

from __future__ import annotations

from typing import NamedTuple

from torch import Tensor

from aiayn.modules.attention import CrossAttention, split_heads
from aiayn.modules.cache import MemoryKeyValues


class SharedMemory(NamedTuple):
    """One layer's memory keys and values, (B, H, S, Dh) each, read by W rows per sentence:
    decoder rows b·W .. b·W+W-1 are the beams of sentence b."""

    keys: Tensor
    values: Tensor
    rows_per_sentence: int

    @classmethod
    def of(cls, memory: MemoryKeyValues) -> SharedMemory:
        """Shared memory with one decoder row per sentence."""
        return cls(memory.keys, memory.values, 1)

    def regrouped(self, rows_per_sentence: int, sentences: Tensor | None = None) -> SharedMemory:
        """Read by ``rows_per_sentence`` rows per sentence from now on; with ``sentences``
        (B',), only those sentences remain, in that order."""
        keys, values = self.keys, self.values
        if sentences is not None:
            keys, values = keys.index_select(0, sentences), values.index_select(0, sentences)
        return SharedMemory(keys, values, rows_per_sentence)


class BeamSharedCrossAttention(CrossAttention):
    """``CrossAttention`` that also accepts ``SharedMemory``: the W rows of a sentence
    attend to its one row of keys/values in a single call."""

    def forward(
        self,
        x: Tensor,
        memory_kv: MemoryKeyValues | SharedMemory,
        *,
        mask: Tensor | None = None,
        need_weights: bool = False,
    ) -> tuple[Tensor, Tensor | None]:
        """Args as ``CrossAttention.forward``; with ``SharedMemory``, ``x`` is (N, T, D)
        and ``mask`` broadcastable to (B, H, 1, S). Returns (N, T, D) and (N, H, T, S)."""
        rows = getattr(memory_kv, "rows_per_sentence", 1)
        if rows == 1:
            return super().forward(x, memory_kv, mask=mask, need_weights=need_weights)
        q = split_heads(self.q_proj(x), self.n_heads)  # (N, H, T, Dh)
        n, h, t, dh = q.shape
        b = n // rows
        q = q.view(b, rows, h, t, dh).transpose(1, 2).reshape(b, h, rows * t, dh)  # (B,H,W·T,Dh)
        out, weights = self.attend(
            q, memory_kv.keys, memory_kv.values, mask=mask, need_weights=need_weights
        )  # (B, W·T, D): the queries of row w of a sentence are w·T .. w·T+T-1
        if weights is not None:
            weights = _per_row(weights, rows)  # (N, H, T, S)
        return self.out_proj(out.reshape(n, t, -1)), weights  # (N, T, D)


def _per_row(x: Tensor, rows: int) -> Tensor:
    """(B, H, W·T, E) -> (N, H, T, E) with N = B·W: undo the grouping of a sentence's rows."""
    b, h, wt, e = x.shape
    return x.view(b, h, rows, wt // rows, e).transpose(1, 2).reshape(b * rows, h, wt // rows, e)
