"""The interface search algorithms decode through, and its Transformer implementation.

Search code sees only ``start``, ``step`` and ``reorder``, so tests can replace the model by
a scripted decoder with hand-set probabilities (fairseq's approach).

Shapes: B sentences, W rows (beams) per sentence, N = B·W rows, S source length, V vocabulary.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Any, Protocol

import torch
from torch import Tensor

from aiayn.models.transformer import Transformer
from aiayn.modules import KVCache
from aiayn.modules.packed_linear import packed_for_inference


class StepDecoder(Protocol):
    """One decoding step at a time, for N rows: W consecutive rows per sentence (its
    beams), the same W for every sentence (row b·W + w is beam w of sentence b)."""

    def start(self, src: Tensor) -> Any:
        """Encode (B, S) sources; return a state for B rows, one per sentence."""
        ...

    def step(self, tokens: Tensor, state: Any) -> tuple[Tensor, Any]:
        """Feed each row's newest token (N, 1); return (N, V) log-probabilities and the state."""
        ...

    def reorder(self, state: Any, index: Tensor, *, sentences: Tensor | None = None) -> Any:
        """Keep rows ``index`` (N',), each taken from a beam of the same sentence; N' may
        be more than N (beam search starts with one row per sentence, then keeps K).

        With ``sentences`` (B',), only those sentences remain, in that order (finished ones
        leave the batch), and ``index`` holds the W' rows of each of them.
        """
        ...


@dataclass(frozen=True)
class TransformerState:
    src_mask: Tensor  # (B, 1, 1, S)
    cache: KVCache


class TransformerStepper:
    """A ``StepDecoder`` over a Transformer with its KV cache: each step feeds one token,
    self-attention keys/values grow by one, encoder–decoder keys/values are computed once."""

    def __init__(self, model: Transformer):
        """The output projection is packed once here (``packed_for_inference``): build a
        new stepper after changing the model's weights."""
        self.model = model
        self.project = packed_for_inference(model.output.proj)

    def start(self, src: Tensor) -> TransformerState:
        """Encode once per sentence: later, the beams of a sentence share its memory keys
        and values (``CrossAttention`` groups their queries), so nothing is repeated."""
        src_mask = self.model.source_mask(src)  # (B, 1, 1, S)
        memory = self.model.encode(src, src_mask)  # (B, S, D)
        return TransformerState(src_mask, self.model.start_cache(memory))

    def step(self, tokens: Tensor, state: TransformerState) -> tuple[Tensor, TransformerState]:
        states, cache = self.model.decode_states(tokens, None, state.src_mask, cache=state.cache)
        return self._log_probs(states[:, -1]), TransformerState(state.src_mask, cache)

    def _log_probs(self, states: Tensor) -> Tensor:
        """(N, D) final decoder states -> (N, V) next-token log-probabilities."""
        logits = self.project(states).float()  # (N, V)
        if logits.device.type == "cpu" and _log_softmax_can_overwrite(logits.size(-1)):
            return torch.log_softmax(logits, dim=-1, out=logits)
        return logits.log_softmax(dim=-1)

    def reorder(
        self, state: TransformerState, index: Tensor, *, sentences: Tensor | None = None
    ) -> TransformerState:
        if sentences is None:
            return TransformerState(state.src_mask, state.cache.reorder(index))
        return TransformerState(
            state.src_mask.index_select(0, sentences),  # (B', 1, 1, S)
            state.cache.reorder(index, memory_index=sentences),
        )


class UncachedTransformerStepper(TransformerStepper):
    """Re-decodes the whole prefix at every step, without a cache: the reference that cached
    decoding must equal, and the floor in ``bench/decode.py``."""

    def start(self, src: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        src_mask = self.model.source_mask(src)  # (B, 1, 1, S)
        memory = self.model.encode(src, src_mask)  # (B, S, D)
        prefix = torch.zeros(src.size(0), 0, dtype=torch.long, device=src.device)  # (B, 0)
        return memory, src_mask, prefix

    def step(self, tokens: Tensor, state: tuple[Tensor, Tensor, Tensor]) -> tuple[Tensor, Any]:
        memory, src_mask, prefix = state
        prefix = torch.cat([prefix, tokens], dim=1)  # (N, t+1)
        states, _ = self.model.decode_states(prefix, memory, src_mask)  # (N, t+1, D)
        return self._log_probs(states[:, -1]), (memory, src_mask, prefix)

    def reorder(
        self,
        state: tuple[Tensor, Tensor, Tensor],
        index: Tensor,
        *,
        sentences: Tensor | None = None,
    ) -> Any:
        """Memory and mask are held per row here; beams of one sentence share identical rows,
        so they are selected only when the rows of sentences change (in number, or when
        sentences leave the batch)."""
        memory, src_mask, prefix = state
        if sentences is not None or len(index) != len(prefix):
            memory, src_mask = memory.index_select(0, index), src_mask.index_select(0, index)
        return memory, src_mask, prefix.index_select(0, index)


@functools.cache
def _log_softmax_can_overwrite(width: int) -> bool:
    """Whether PyTorch's CPU log-softmax may write its result over its input, checked once
    per row width on this PyTorch: its kernel reads a row before writing it, which is not
    a documented promise. Overwriting the logits instead of writing a second (N, V) table
    makes a tiny model's beam search ~6% faster here."""
    x = torch.randn(3, width, generator=torch.Generator().manual_seed(0))
    expected = x.log_softmax(dim=-1)
    try:
        torch.log_softmax(x, dim=-1, out=x)
    except RuntimeError:
        return False
    return torch.equal(x, expected)
