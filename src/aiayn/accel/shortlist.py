"""A vocabulary shortlist: each batch decodes over the target pieces its sources make likely,
and the output projection, a step's largest product at large vocabularies, is computed
over those rows only.

For a batch, the pieces allowed are the union of the ``k`` likeliest translations of each
of its source pieces (a lexical table from the training corpus, ``aiayn.data.lexicon``,
written into the model directory by ``aiayn shortlist``: ``aiayn.translate.shortlist_table``),
the table's most frequent target pieces, the special ids, and any glossary term's pieces: Marian's
lexical shortlist (``--shortlist lex.s2t first best``), CTranslate2's vocabulary map
(``use_vmap``). The search itself is unchanged: a step's scores are (N, V) with -inf outside the
allowed pieces, log-probabilities normalised over them.

Shapes: N rows, D d_model, K allowed pieces, V target vocabulary, V_s source vocabulary.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import torch
from torch import Tensor

from aiayn.config import SpecialIds


@dataclass(frozen=True)
class Shortlist:
    """A lexical table: ``best`` (V_s, K) int64 target ids of each source id, best first
    (-1 where fewer), ``frequent`` (N,) int64 target ids, most frequent first."""

    best: Tensor
    frequent: Tensor

    @property
    def per_source(self) -> int:
        """K: the most target pieces per source piece this table can allow."""
        return self.best.size(1)

    def rows(self, src: Tensor, k: int, specials: SpecialIds, extra: Iterable[int] = ()) -> Tensor:
        """(K',) sorted target ids a batch of (B, S) sources decodes over: the ``k`` best of
        each source id, the frequent ones, ``specials`` and ``extra`` (glossary pieces)."""
        ids = src.unique().cpu()  # (U,) padding included: its row is the special ids
        best = self.best[ids, :k].flatten()  # (U · k,)
        special = (specials.pad, specials.unk, specials.bos, specials.eos)
        fixed = torch.tensor([*special, *extra], dtype=torch.long)
        rows = torch.cat([best[best >= 0], self.frequent, fixed]).unique()  # sorted
        return rows.to(src.device)

    def by_sentence(
        self, src: Tensor, k: int, specials: SpecialIds, extra: Sequence[Iterable[int]] = ()
    ) -> tuple[Tensor, Tensor]:
        """The (K',) sorted rows the batch of (B, S) sources decodes over, the union of the
        rows each sentence would have alone (``rows``, with its own ``extra``), and the
        (B, K') bool of each sentence's own: its translation does not depend on its
        batch-mates."""
        own = [
            self.rows(src[b : b + 1], k, specials, extra[b] if extra else ())
            for b in range(src.size(0))
        ]
        rows = torch.cat(own).unique()  # sorted
        return rows, torch.stack([torch.isin(rows, mine) for mine in own])  # (K',), (B, K')


class Hidden(Protocol):
    """What a shortlist needs of a stepper (``aiayn.modules.stepper.TransformerStepper``
    and the fast profile's have it): a step's final states, and the logits of some rows of
    the output projection."""

    def start(self, src: Tensor) -> Any: ...

    def hidden(self, tokens: Tensor, state: Any) -> tuple[Tensor, Any]: ...

    def logits_over(self, rows: Tensor) -> Callable[[Tensor], Tensor]: ...

    def reorder(self, state: Any, index: Tensor, *, sentences: Tensor | None = None) -> Any: ...


class ShortlistStepper:
    """A ``StepDecoder`` whose scores cover only ``rows`` (K,) of the vocabulary of ``vocab``
    pieces: the others are -inf, and log-probabilities are normalised over ``rows``. With
    ``allowed`` (B, K) bool, each sentence's rows decode over its own part of ``rows`` only
    (``Shortlist.allowed``): the state carries each row's part through the search's
    reorders."""

    def __init__(self, inner: Hidden, rows: Tensor, vocab: int, allowed: Tensor | None = None):
        self.inner, self.rows, self.vocab, self.allowed = inner, rows, vocab, allowed
        self.logits = inner.logits_over(rows)  # (N, D) -> (N, K)

    def start(self, src: Tensor) -> Any:
        return self.inner.start(src), self.allowed  # one row per sentence: (B, K)

    def step(self, tokens: Tensor, state: Any, *, normalize: bool = True) -> tuple[Tensor, Any]:
        inner, allowed = state
        hidden, inner = self.inner.hidden(tokens, inner)  # (N, D)
        logits = self.logits(hidden)  # (N, K) float32
        if allowed is not None:
            logits = logits.masked_fill(~allowed, float("-inf"))
        if normalize:
            logits = logits.log_softmax(dim=-1)
        scores = logits.new_full((logits.size(0), self.vocab), float("-inf"))  # (N, V)
        return scores.index_copy_(1, self.rows, logits), (inner, allowed)

    def reorder(self, state: Any, index: Tensor, *, sentences: Tensor | None = None) -> Any:
        inner, allowed = state
        inner = self.inner.reorder(inner, index, sentences=sentences)
        return inner, None if allowed is None else allowed.index_select(0, index)
