"""A lexical table from a parallel corpus: for each source piece, the target pieces it most
likely translates into, and the target pieces by frequency; what a vocabulary shortlist
decodes over (``aiayn.accel.shortlist``).

The translation probabilities are IBM Model 1's t(t | s) (Brown et al., 1993), estimated by
a few rounds of expectation-maximisation over the subword ids of sentence pairs, a NULL
source piece included: the kind of table Marian's lexical shortlists hold (fast_align's
lex.s2t, IBM Model 2 with a diagonal prior), from which CTranslate2's vocabulary maps are
made. The co-occurrences are listed once, in chunks, as
two int32 per (source, target) position pair: ~8 bytes × source × target length per
sentence pair (~0.5 GB for 200,000 Multi30k-length pairs).

Shapes: P co-occurring (source, target) positions of a chunk, U distinct pairs, V_s and V_t
the vocabularies, K target pieces kept per source piece, N frequent pieces kept.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

Pair = tuple[Sequence[int], Sequence[int]]  # a sentence pair's source and target ids
CHUNK = 20_000  # sentence pairs per chunk


@dataclass(frozen=True)
class LexicalTable:
    best: np.ndarray  # (V_s, K) int32 target ids by t(t | s), best first; -1 where fewer
    frequent: np.ndarray  # (N,) int32 target ids, most frequent first


def lexical_table(
    pairs: Sequence[Pair],
    *,
    src_vocab: int,
    tgt_vocab: int,
    best: int,
    frequent: int,
    rounds: int = 5,
) -> LexicalTable:
    """The ``best`` likeliest target pieces of each source piece (IBM Model 1 after
    ``rounds`` rounds of EM) and the ``frequent`` most frequent target pieces of ``pairs``."""
    null = src_vocab  # the NULL source piece every target piece may align to
    keys = _distinct_pairs(pairs, null, tgt_vocab)  # (U,) sorted s · V_t + t
    chunks = [  # per chunk, (P,) each co-occurrence's pair index and target position
        _positions(pairs[start : start + CHUNK], keys, null, tgt_vocab)
        for start in range(0, len(pairs), CHUNK)
    ]
    t = np.ones(len(keys))  # (U,) t(t | s), uniform (unnormalised) to start
    for _ in range(rounds):
        counts = np.zeros(len(keys))
        for index, position in chunks:
            p = t[index]  # (P,)
            total = np.bincount(position, weights=p)  # (target positions,)
            counts += np.bincount(index, weights=p / total[position], minlength=len(keys))
        per_source = np.bincount(keys // tgt_vocab, weights=counts)  # (V_s + 1,)
        t = counts / per_source[keys // tgt_vocab]
    return LexicalTable(_best(keys, t, src_vocab, tgt_vocab, best), _frequent(pairs, frequent))


def _source_target(chunk: Sequence[Pair], null: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Every (source, target) position pair of ``chunk``: (P,) source ids (NULL included),
    (P,) target ids, (P,) the number of the target position within the chunk."""
    sources, targets, positions = [], [], []
    position = 0
    for src, tgt in chunk:
        s = np.append(np.asarray(src, dtype=np.int64), null)  # (S + 1,)
        tg = np.asarray(tgt, dtype=np.int64)  # (T,)
        sources.append(np.tile(s, len(tg)))  # (T · (S + 1),)
        targets.append(np.repeat(tg, len(s)))
        positions.append(np.repeat(np.arange(position, position + len(tg)), len(s)))
        position += len(tg)
    if not sources:
        empty = np.zeros(0, dtype=np.int64)
        return empty, empty, empty
    return np.concatenate(sources), np.concatenate(targets), np.concatenate(positions)


def _distinct_pairs(pairs: Sequence[Pair], null: int, tgt_vocab: int) -> np.ndarray:
    """(U,) sorted keys s · V_t + t of the (source, target) pairs that co-occur."""
    keys = np.zeros(0, dtype=np.int64)
    for start in range(0, len(pairs), CHUNK):
        s, t, _ = _source_target(pairs[start : start + CHUNK], null)
        keys = np.union1d(keys, s * tgt_vocab + t)
    return keys


def _positions(
    chunk: Sequence[Pair], keys: np.ndarray, null: int, tgt_vocab: int
) -> tuple[np.ndarray, np.ndarray]:
    """Per co-occurrence in ``chunk``: (P,) its pair's index in ``keys``, (P,) its target
    position."""
    s, t, position = _source_target(chunk, null)
    return np.searchsorted(keys, s * tgt_vocab + t).astype(np.int32), position.astype(np.int32)


def _best(keys: np.ndarray, t: np.ndarray, src_vocab: int, tgt_vocab: int, k: int) -> np.ndarray:
    """(V_s, k) each source piece's k target pieces of highest t(t | s); -1 pads."""
    source, target = keys // tgt_vocab, keys % tgt_vocab  # (U,), (U,)
    order = np.lexsort((target, -t, source))  # by source, then t descending, ties by id
    source, target = source[order], target[order]
    first = np.searchsorted(source, source)  # (U,) where each source's run starts
    rank = np.arange(len(source)) - first  # (U,)
    keep = (rank < k) & (source < src_vocab)  # NULL's row is not kept
    table = np.full((src_vocab, k), -1, dtype=np.int32)
    table[source[keep], rank[keep]] = target[keep]
    return table


def _frequent(pairs: Sequence[Pair], n: int) -> np.ndarray:
    """(n,) the target ids seen most often (ties by id), fewer if fewer were seen."""
    counts = np.bincount(
        np.concatenate([np.zeros(0, np.int64), *(np.asarray(t, np.int64) for _, t in pairs)])
    )
    seen = np.flatnonzero(counts)
    order = seen[np.lexsort((seen, -counts[seen]))]
    return order[:n].astype(np.int32)
