"""The interface search algorithms decode through, and the paper's way to implement it.

Search code sees only ``start``, ``step`` and ``reorder``, so tests can replace the model by
a scripted decoder with hand-set probabilities (fairseq's approach). The layout of beams
(W consecutive rows per sentence) is a contract of this interface, and of nothing below it.
``aiayn.accel.stepper`` implements the same interface with the fast profile's tricks.

Shapes: B sentences, W rows (beams) per sentence, N = B·W rows, S source length, T decoded
positions, D d_model, V vocabulary.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal, Protocol

import torch
from torch import Tensor, nn

from aiayn.errors import AiaynError
from aiayn.modules.cache import KVCache


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


class EncoderDecoder(Protocol):
    """What a stepper needs of a model (``aiayn.models.Transformer`` has it)."""

    training: bool

    def source_mask(self, src: Tensor) -> Tensor: ...

    def encode(self, src: Tensor, src_mask: Tensor | None = None) -> Tensor: ...

    def start_cache(self, memory: Tensor) -> KVCache: ...

    def decode(
        self,
        tgt: Tensor,
        src_mask: Tensor | None,
        *,
        memory: Tensor | None = None,
        cache: KVCache | None = None,
    ) -> tuple[Tensor, KVCache | None]:
        """(B, T, D) final states of T new positions and the extended cache."""
        ...

    def logits(self, hidden: Tensor) -> Tensor: ...


Precision = Literal["fp32", "bf16", "int8"]  # int8: a trick of the fast profile (aiayn.accel)


class PrecisionError(AiaynError, ValueError):
    """A precision this stepper cannot decode in."""


class StepperFactory(Protocol):
    """Makes a profile's stepper for a model (``aiayn.accel.Profile.stepper``).

    ``packed=False``: decode through the model's own weights, never a packed copy of them
    (for a model whose weights change between decodings, as in a trainer's validation).
    """

    def __call__(
        self, model: Any, *, precision: Precision = "fp32", packed: bool = True
    ) -> StepDecoder: ...


@dataclass(frozen=True)
class TransformerState:
    src_mask: Tensor  # (N, 1, 1, S), or (B, 1, 1, S) when memory is shared by a sentence's rows
    cache: KVCache


class TransformerStepper:
    """A ``StepDecoder`` over a Transformer with its KV cache, the plain way: each step
    feeds one token and computes log_softmax(logits); every row holds its own copy of its
    sentence's memory keys/values and source mask, reselected with the rows. With
    ``precision="bf16"``, encoding and each step run under bfloat16 autocast."""

    def __init__(self, model: Any, *, precision: Precision = "fp32"):
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
        hidden, state = self.hidden(tokens, state)  # (N, D)
        with self._precision(tokens):
            return self.scores(hidden, normalize), state

    def hidden(self, tokens: Tensor, state: TransformerState) -> tuple[Tensor, TransformerState]:
        """Feed each row's newest token (N, 1); return the (N, D) final decoder states and
        the state."""
        with self._precision(tokens):
            hidden, cache = self.model.decode(tokens, state.src_mask, cache=state.cache)
        return hidden[:, -1], TransformerState(state.src_mask, cache)

    def logits_over(self, rows: Tensor) -> Callable[[Tensor], Tensor]:
        """The next-token logits of the target ids ``rows`` (K,) only: a function of (N, D)
        final decoder states to (N, K) float32 logits (a vocabulary shortlist,
        ``aiayn.accel.shortlist``), through ``output_rows``."""
        project = self.output_rows(rows)

        def logits(hidden: Tensor) -> Tensor:
            with self._precision(hidden):
                return project(hidden).float()  # (N, K)

        return logits

    def output_rows(self, rows: Tensor) -> nn.Module:
        """The output projection's rows ``rows`` (K,) as an ``nn.Linear`` (D -> K)."""
        return linear_rows(self.model.output.weight, self.model.output.bias, rows)

    def scores(self, hidden: Tensor, normalize: bool) -> Tensor:
        """(N, D) final decoder states -> (N, V) log-probabilities, or logits when not
        ``normalize``."""
        return self.log_probs(hidden) if normalize else self.logits(hidden)

    def logits(self, hidden: Tensor) -> Tensor:
        """(N, D) final decoder states -> (N, V) float32 next-token logits."""
        return self.model.logits(hidden).float()

    def log_probs(self, hidden: Tensor) -> Tensor:
        """(N, D) final decoder states -> (N, V) float32 next-token log-probabilities."""
        return self.model.logits(hidden).float().log_softmax(dim=-1)

    def _precision(self, x: Tensor) -> contextlib.AbstractContextManager:
        if not self.autocast:
            return contextlib.nullcontext()
        return torch.autocast(x.device.type, dtype=torch.bfloat16)

    def reorder(
        self, state: TransformerState, index: Tensor, *, sentences: Tensor | None = None
    ) -> TransformerState:
        return TransformerState(state.src_mask.index_select(0, index), state.cache.reorder(index))


def linear_rows(weight: Tensor, bias: Tensor | None, rows: Tensor) -> nn.Linear:
    """An ``nn.Linear`` (D -> K) holding a copy of rows ``rows`` (K,) of ``weight`` (V, D)
    and ``bias`` (V,), without gradients."""
    linear = nn.Linear(weight.size(1), len(rows), bias=bias is not None)
    linear.to(weight.device, weight.dtype).requires_grad_(False)
    linear.weight.copy_(weight.detach().index_select(0, rows))  # (K, D)
    if bias is not None:
        linear.bias.copy_(bias.detach().index_select(0, rows))  # (K,)
    return linear


def plain_stepper(model: Any, *, precision: Precision = "fp32", packed: bool = True):
    """The reference profile's ``StepperFactory``: a ``TransformerStepper`` (it always
    decodes through the model's own weights, so ``packed`` changes nothing).

    Raises:
        PrecisionError: for int8, which only the fast profile decodes in.
    """
    if precision == "int8":
        raise PrecisionError(
            "precision int8 is a speed trick of the fast profile; the reference profile "
            "decodes in fp32 or bf16"
        )
    return TransformerStepper(model, precision=precision)


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
        hidden, state = self.hidden(tokens, state)  # (N, D)
        return self.scores(hidden, normalize), state

    def hidden(self, tokens: Tensor, state: tuple[Tensor, Tensor, Tensor]) -> tuple[Tensor, Any]:
        memory, src_mask, prefix = state
        prefix = torch.cat([prefix, tokens], dim=1)  # (N, t+1)
        hidden, _ = self.model.decode(prefix, src_mask, memory=memory)  # (N, t+1, D)
        return hidden[:, -1], (memory, src_mask, prefix)

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
