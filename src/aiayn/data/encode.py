"""Encoding a parallel corpus into shards, in worker processes, with bounded memory.

The main process reads the corpus (so that errors name the file and line, and line counts
are checked in one place), cuts it into chunks, and hands them to the workers. At most
``2 × workers`` chunks are in flight at any time, and results come back in corpus order, so
the dataset is the same whatever the number of workers. Each worker loads the tokenizers
once, encodes a chunk, drops pairs that are too long, and returns flat id arrays; the main
process appends them to the current shard.

Shapes: P pairs in a chunk, N ids.
"""

from __future__ import annotations

import multiprocessing
from collections import deque
from collections.abc import Iterable, Iterator
from concurrent.futures import Future, ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass, field
from itertools import islice
from pathlib import Path

import numpy as np

from aiayn.data.indexed import IndexedWriter
from aiayn.data.tokenizer import Tokenizer, load_tokenizer
from aiayn.data.tokenizer_files import load_tokenizers
from aiayn.errors import AiaynError

CHUNK = 10_000  # pairs encoded at a time
POOL_FROM_CHUNK = 10  # smaller splits are encoded in this process: starting workers costs more


class WorkerDied(AiaynError):
    """An encoding worker process ended without its result (killed, out of memory)."""


@dataclass(frozen=True)
class Filter:
    """Which training pairs to drop: a side longer than ``max_len``, or sides whose lengths
    differ by more than ``max_len_ratio`` times (§5.1 data is usually cleaned this way)."""

    max_len: int
    max_len_ratio: float
    active: bool  # training data only; valid and test sets are kept whole


@dataclass
class Encoded:
    """One chunk, encoded and filtered: ids back to back and each sentence's length."""

    src_ids: np.ndarray  # (N_src,)
    src_lengths: np.ndarray  # (P,)
    tgt_ids: np.ndarray  # (N_tgt,)
    tgt_lengths: np.ndarray  # (P,)
    dropped_too_long: int = 0
    dropped_ratio: int = 0


@dataclass
class SplitStats:
    pairs: int = 0
    src_tokens: int = 0
    tgt_tokens: int = 0
    dropped_empty: int = 0
    dropped_too_long: int = 0
    dropped_ratio: int = 0
    files: dict[str, str] = field(default_factory=dict)  # role -> source path
    text_sha256: dict[str, str] = field(default_factory=dict)  # role -> its digest
    shards: list[str] = field(default_factory=list)  # file prefixes, in order

    def add(self, chunk: Encoded) -> None:
        self.pairs += len(chunk.src_lengths)
        self.src_tokens += len(chunk.src_ids)
        self.tgt_tokens += len(chunk.tgt_ids)
        self.dropped_too_long += chunk.dropped_too_long
        self.dropped_ratio += chunk.dropped_ratio


_tokenizers: tuple[Tokenizer, Tokenizer] | None = None  # a worker's, loaded once


def _load_tokenizers(src_model: str, tgt_model: str) -> None:
    """Load the two tokenizer files, or (both paths a directory) the tokenizers its
    ``tokenizer.json`` describes."""
    global _tokenizers
    if Path(src_model).is_dir():
        _tokenizers = load_tokenizers(src_model)[:2]
        return
    src = load_tokenizer(src_model)
    _tokenizers = (src, src if tgt_model == src_model else load_tokenizer(tgt_model))


def _encode_chunk(pairs: list[tuple[str, str]], keep: Filter) -> Encoded:
    assert _tokenizers is not None, "the tokenizers are loaded when a worker starts"
    src_tok, tgt_tok = _tokenizers
    src = src_tok.encode([s for s, _ in pairs])
    tgt = tgt_tok.encode([t for _, t in pairs])
    kept_src, kept_tgt, too_long, ratio = [], [], 0, 0
    for s, t in zip(src, tgt, strict=True):
        if keep.active and max(len(s), len(t)) > keep.max_len:
            too_long += 1
        elif keep.active and max(len(s), len(t)) > keep.max_len_ratio * max(min(len(s), len(t)), 1):
            ratio += 1
        else:
            kept_src.append(s)
            kept_tgt.append(t)
    return Encoded(*_flat(kept_src), *_flat(kept_tgt), too_long, ratio)


def _flat(sentences: list[list[int]]) -> tuple[np.ndarray, np.ndarray]:
    lengths = np.fromiter(map(len, sentences), dtype=np.int64, count=len(sentences))
    ids = np.fromiter((i for s in sentences for i in s), dtype=np.int32, count=int(lengths.sum()))
    return ids, lengths


class ChunkEncoder:
    """Encodes chunks in order: in ``workers`` processes once a split has more than
    ``POOL_FROM_CHUNK`` chunks, in this process before that (and always with one worker).
    The tokenizers are two files, or twice a directory with a ``tokenizer.json``."""

    def __init__(self, src_model: Path, tgt_model: Path, *, workers: int):
        self.workers = workers
        self._models = (str(src_model), str(tgt_model))
        self._pool: ProcessPoolExecutor | None = None
        _load_tokenizers(*self._models)

    def __enter__(self) -> ChunkEncoder:
        return self

    def __exit__(self, *_) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=True, cancel_futures=True)

    def encode(self, pairs: Iterable[tuple[str, str]], keep: Filter) -> Iterator[Encoded]:
        """The chunks of ``pairs``, encoded, in order."""
        chunks = iter(lambda: list(islice(pairs, CHUNK)), [])
        in_flight: deque[Future[Encoded]] = deque()
        try:
            for number, chunk in enumerate(chunks):
                if self.workers == 1 or number < POOL_FROM_CHUNK:
                    yield _encode_chunk(chunk, keep)
                    continue
                in_flight.append(self._workers().submit(_encode_chunk, chunk, keep))
                if len(in_flight) >= 2 * self.workers:
                    yield in_flight.popleft().result()
            while in_flight:
                yield in_flight.popleft().result()
        except BrokenProcessPool:
            raise WorkerDied(
                "an encoding worker process died (killed, or out of memory?); nothing was "
                "written: run prepare again, with fewer --workers if memory is short"
            ) from None

    def _workers(self) -> ProcessPoolExecutor:
        if self._pool is None:
            self._pool = ProcessPoolExecutor(
                max_workers=self.workers,
                mp_context=multiprocessing.get_context("spawn"),  # no fork of a threaded parent
                initializer=_load_tokenizers,
                initargs=self._models,
            )
        return self._pool


class ShardWriter:
    """Writes a split as shards of about ``shard_size`` pairs: ``NAME.src``/``NAME.tgt``
    when one shard holds it all, else ``NAME.00000.src``, ``NAME.00001.src``, ..."""

    def __init__(self, directory: Path, name: str, dtype: np.dtype, *, shard_size: int):
        self.directory, self.name, self.dtype, self.shard_size = directory, name, dtype, shard_size
        self.shards: list[str] = []
        self._writers: tuple[IndexedWriter, IndexedWriter] | None = None

    def add(self, chunk: Encoded) -> None:
        """Append a chunk's pairs, starting a new shard whenever one holds ``shard_size``
        (a chunk may be cut across shards)."""
        src_ends = np.cumsum(chunk.src_lengths)  # (P,)
        tgt_ends = np.cumsum(chunk.tgt_lengths)  # (P,)
        start, n = 0, len(chunk.src_lengths)
        while start < n:
            if self._writers is None or self._writers[0].count >= self.shard_size:
                self._next_shard()
            assert self._writers is not None
            stop = min(n, start + self.shard_size - self._writers[0].count)
            for writer, ids, lengths, ends in (
                (self._writers[0], chunk.src_ids, chunk.src_lengths, src_ends),
                (self._writers[1], chunk.tgt_ids, chunk.tgt_lengths, tgt_ends),
            ):
                first = int(ends[start - 1]) if start else 0
                writer.add_flat(ids[first : int(ends[stop - 1])], lengths[start:stop])
            start = stop

    def close(self) -> list[str]:
        """Finish the last shard; return the shards' file prefixes."""
        if self._writers is None:
            self._next_shard()
        self._close_current()
        if len(self.shards) == 1:  # one shard: plain names
            for side in ("src", "tgt"):
                for suffix in (".bin", ".idx"):
                    old = self.directory / f"{self.shards[0]}.{side}{suffix}"
                    old.rename(self.directory / f"{self.name}.{side}{suffix}")
            self.shards = [self.name]
        return self.shards

    def _next_shard(self) -> None:
        self._close_current()
        shard = f"{self.name}.{len(self.shards):05d}"
        self.shards.append(shard)
        self._writers = (
            IndexedWriter(self.directory / f"{shard}.src", self.dtype),
            IndexedWriter(self.directory / f"{shard}.tgt", self.dtype),
        )

    def _close_current(self) -> None:
        if self._writers is not None:
            for writer in self._writers:
                writer.close()
            self._writers = None
