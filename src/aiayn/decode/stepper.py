"""The interface search algorithms decode through, and its Transformer implementations.

Search code sees only ``start``, ``step`` and ``reorder``, so tests can replace the model by
a scripted decoder with hand-set probabilities (fairseq's approach). The layout of beams
(W consecutive rows per sentence) is a contract of this interface, and of nothing below it.

Shapes: B sentences, W rows (beams) per sentence, N = B·W rows, S source length, V vocabulary.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass, replace
from typing import Any, Literal, Protocol

import torch
from torch import Tensor

from aiayn.accel.output import log_probs_in_place
from aiayn.accel.packed import MIN_PACKED_PRODUCT, can_pack, packed_for_decoding
from aiayn.accel.shared_memory import SharedMemory
from aiayn.accel.token_step import TokenStep, TokenStepState
from aiayn.models.transformer import Transformer
from aiayn.modules import KVCache


class StepDecoder(Protocol):
    """One decoding step at a time, for N rows: W consecutive rows per sentence (its
    beams), the same W for every sentence (row b·W + w is beam w of sentence b)."""

    def start(self, src: Tensor) -> Any:
        """Encode (B, S) sources; return a state for B rows, one per sentence."""
        ...

    def step(self, tokens: Tensor, state: Any, *, normalize: bool = True) -> tuple[Tensor, Any]:
        """Feed each row's newest token (N, 1); return (N, V) log-probabilities and the state.

        With ``normalize=False``, (N, V) float32 scores in the order of each row's
        log-probabilities (the logits) may be returned instead, for a search that needs
        only the best token.
        """
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
    src_mask: Tensor  # (N, 1, 1, S), or (B, 1, 1, S) when memory is shared by a sentence's rows
    cache: KVCache


Precision = Literal["fp32", "bf16"]


class TransformerStepper:
    """A ``StepDecoder`` over a Transformer with its KV cache, the plain way: each step
    feeds one token and computes log_softmax(logits); every row holds its own copy of its
    sentence's memory keys/values and source mask, reselected with the rows. With
    ``precision="bf16"``, encoding and each step run under bfloat16 autocast."""

    def __init__(self, model: Transformer, *, precision: Precision = "fp32"):
        self.model = model
        self.autocast = precision == "bf16"

    def start(self, src: Tensor) -> TransformerState:
        with self._precision(src):
            src_mask = self.model.source_mask(src)  # (B, 1, 1, S)
            memory = self.model.encode(src, src_mask)  # (B, S, D)
            return TransformerState(src_mask, self.model.start_cache(memory))

    def step(
        self, tokens: Tensor, state: TransformerState, *, normalize: bool = True
    ) -> tuple[Tensor, TransformerState]:
        with self._precision(tokens):
            hidden, cache = self.model.decode(tokens, state.src_mask, cache=state.cache)
            return self.scores(hidden[:, -1], normalize), TransformerState(state.src_mask, cache)

    def scores(self, hidden: Tensor, normalize: bool) -> Tensor:
        """(N, D) final decoder states -> (N, V) log-probabilities, or logits when not
        ``normalize``."""
        return self.log_probs(hidden) if normalize else self.logits(hidden)

    def logits(self, hidden: Tensor) -> Tensor:
        """(N, D) final decoder states -> (N, V) float32 next-token logits."""
        return self.model.logits(hidden).float()

    def _precision(self, x: Tensor) -> contextlib.AbstractContextManager:
        if not self.autocast:
            return contextlib.nullcontext()
        return torch.autocast(x.device.type, dtype=torch.bfloat16)

    def log_probs(self, hidden: Tensor) -> Tensor:
        """(N, D) final decoder states -> (N, V) float32 next-token log-probabilities."""
        return self.model.logits(hidden).float().log_softmax(dim=-1)

    def reorder(
        self, state: TransformerState, index: Tensor, *, sentences: Tensor | None = None
    ) -> TransformerState:
        return TransformerState(state.src_mask.index_select(0, index), state.cache.reorder(index))


class FastTransformerStepper(TransformerStepper):
    """``TransformerStepper`` with the fast profile's decoding tricks (``aiayn.accel``):
    the beams of a sentence share one copy of its memory keys/values and source mask
    (``SharedMemory``, read by ``BeamSharedCrossAttention``); on CPU, the model decodes
    through a copy with its large weights, and every weight of the encoder and the memory
    projections, packed once in the precision's dtype (``packed_for_decoding``: build a new
    stepper after changing the weights; the decoder's small maps multiply packed only many
    rows at once, ``PackedFromRows``), which needs
    no autocast (in bf16, the rest of a step stays in float32; a CPU on which oneDNN cannot
    pack bfloat16 decodes under autocast instead), one token per row in few calls
    (``TokenStep``, with a cache of its own); and the log-softmax overwrites the logits.

    ``packed=False`` decodes through the model's own weights: for a model whose weights
    change between decodings (a trainer's validation), where each packed copy would only add
    oneDNN kernels of its own row shapes to the process (see ``stepper_for``)."""

    def __init__(self, model: Transformer, *, precision: Precision = "fp32", packed: bool = True):
        dtype = torch.bfloat16 if precision == "bf16" else torch.float32
        if not (packed and can_pack(model, dtype)):
            super().__init__(model, precision=precision)
        else:
            twin = packed_for_decoding(
                model, dtype, many_rows=_many_rows(model), min_product=MIN_PACKED_PRODUCT
            )
            super().__init__(twin)
        self.token_step = self._token_step()

    def _token_step(self) -> TokenStep | None:
        """``TokenStep`` over the model's decoder on CPU without autocast, else None."""
        weight = next(self.model.parameters())
        if self.autocast or weight.device.type != "cpu":
            return None
        decoder = self.model.decoder
        return TokenStep(decoder.layers, self.model.tgt_embed, decoder.final_norm)

    def start(self, src: Tensor) -> TransformerState | TokenStepState:
        state = super().start(src)
        if self.token_step is not None and not self.model.training:
            return self.token_step.start(state.cache.memory, state.src_mask)
        memory = tuple(SharedMemory.of(kv) for kv in state.cache.memory)
        return TransformerState(state.src_mask, replace(state.cache, memory=memory))

    def step(
        self, tokens: Tensor, state: TransformerState | TokenStepState, *, normalize: bool = True
    ) -> tuple[Tensor, TransformerState | TokenStepState]:
        if isinstance(state, TransformerState):
            return super().step(tokens, state, normalize=normalize)
        assert self.token_step is not None
        hidden, state = self.token_step.step(tokens, state)  # (N, D)
        return self.scores(hidden, normalize), state

    def log_probs(self, hidden: Tensor) -> Tensor:
        return log_probs_in_place(self.model.logits(hidden))

    def reorder(
        self,
        state: TransformerState | TokenStepState,
        index: Tensor,
        *,
        sentences: Tensor | None = None,
    ) -> TransformerState | TokenStepState:
        if isinstance(state, TokenStepState):
            assert self.token_step is not None
            return self.token_step.reorder(state, index, sentences=sentences)
        src_mask = (
            state.src_mask if sentences is None else state.src_mask.index_select(0, sentences)
        )
        rows_per_sentence = len(index) // src_mask.size(0)
        cache = state.cache
        cache = replace(
            cache,
            self_attn=tuple(kv.select(index) for kv in cache.self_attn),
            memory=tuple(kv.regrouped(rows_per_sentence, sentences) for kv in cache.memory),
        )
        return TransformerState(src_mask, cache)


def _many_rows(model: Transformer) -> tuple[str, ...]:
    """The maps that multiply whole source sentences at once: the encoder's, and each
    decoder layer's memory projection."""
    layers = range(len(model.decoder.layers))
    return ("encoder", *(f"decoder.layers.{i}.cross_attn.kv_proj" for i in layers))


class UncachedTransformerStepper(TransformerStepper):
    """Re-decodes the whole prefix at every step, without a cache: the reference that cached
    decoding must equal, and the floor in ``bench/decode.py``."""

    def start(self, src: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        src_mask = self.model.source_mask(src)  # (B, 1, 1, S)
        memory = self.model.encode(src, src_mask)  # (B, S, D)
        prefix = torch.zeros(src.size(0), 0, dtype=torch.long, device=src.device)  # (B, 0)
        return memory, src_mask, prefix

    def step(
        self, tokens: Tensor, state: tuple[Tensor, Tensor, Tensor], *, normalize: bool = True
    ) -> tuple[Tensor, Any]:
        memory, src_mask, prefix = state
        prefix = torch.cat([prefix, tokens], dim=1)  # (N, t+1)
        hidden, _ = self.model.decode(prefix, src_mask, memory=memory)  # (N, t+1, D)
        return self.scores(hidden[:, -1], normalize), (memory, src_mask, prefix)

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


def stepper_for(
    model: Transformer, *, precision: Precision = "fp32", packed: bool = True
) -> TransformerStepper:
    """The cached stepper of the model's profile, computing in ``precision``.

    ``packed=False`` keeps the fast profile off packed weights (``FastTransformerStepper``):
    a trainer's validation decodes through the training weights, so the process keeps no
    packed copy and no kernels of its own (heap in use after 400 updates of the Multi30k
    recipe: 233 MiB instead of 416, the same translations).
    """
    if model.profile.name == "fast":
        return FastTransformerStepper(model, precision=precision, packed=packed)
    return TransformerStepper(model, precision=precision)
