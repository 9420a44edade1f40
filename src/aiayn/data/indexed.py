"""Binary token datasets: ids in one flat array, sentence boundaries in an offsets array.

``PREFIX.bin`` holds the ids of every sentence back to back; ``PREFIX.idx`` holds int64
offsets (n + 1 of them) so sentence i is ``bin[idx[i]:idx[i+1]]``. A large split is cut into
shards, each such a pair of files.

Writing streams: memory stays bounded whatever the corpus size. Reading keeps only the
sentence lengths in memory (the batch sampler needs them) and reads each sentence with
``os.pread`` when a batch asks for it, so a corpus larger than memory is never loaded, and
the operating system's page cache, not the process, holds what was read.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from aiayn.errors import AiaynError

OFFSET = np.dtype(np.int64)
LENGTHS_READ_AT_ONCE = 1 << 20  # offsets read per block when collecting the lengths


def token_dtype(vocab_size: int) -> np.dtype:
    """The smallest unsigned type that holds every id."""
    return np.dtype(np.uint16) if vocab_size <= np.iinfo(np.uint16).max + 1 else np.dtype(np.int32)


def length_dtype(longest: int) -> np.dtype:
    """The smallest type that holds every sentence length."""
    return np.dtype(np.uint16) if longest <= np.iinfo(np.uint16).max else np.dtype(np.int32)


class IndexedWriter:
    """Appends sentences to ``PREFIX.bin`` and their end offsets to ``PREFIX.idx`` as it goes."""

    def __init__(self, prefix: str | Path, dtype: np.dtype):
        self.prefix = Path(prefix)
        self.dtype = np.dtype(dtype)
        self._bin = open(with_suffix(self.prefix, ".bin"), "wb")  # noqa: SIM115
        self._idx = open(with_suffix(self.prefix, ".idx"), "wb")  # noqa: SIM115
        np.zeros(1, dtype=OFFSET).tofile(self._idx)
        self._tokens = 0
        self.count = 0

    def add_flat(self, ids: np.ndarray, lengths: np.ndarray) -> None:
        """Append sentences given as their ids back to back and their lengths."""
        if not len(lengths):
            return
        ids.astype(self.dtype, copy=False).tofile(self._bin)
        ends = self._tokens + np.cumsum(lengths, dtype=OFFSET)
        ends.tofile(self._idx)
        self._tokens = int(ends[-1])
        self.count += len(lengths)

    def add(self, sentences: Sequence[Sequence[int]]) -> None:
        lengths = np.fromiter((len(s) for s in sentences), dtype=OFFSET, count=len(sentences))
        ids = np.fromiter((i for s in sentences for i in s), dtype=self.dtype)
        self.add_flat(ids, lengths)

    def close(self) -> int:
        """Finish both files; return the number of sentences."""
        self._bin.close()
        self._idx.close()
        return self.count


class DatasetFileError(AiaynError, ValueError):
    """A ``.bin`` / ``.idx`` pair that does not hold what ``prepare`` wrote (damaged)."""


class IndexedDataset:
    """Read-only view of a ``PREFIX.bin`` / ``PREFIX.idx`` pair."""

    def __init__(self, prefix: str | Path, dtype: np.dtype | str):
        self.prefix = Path(prefix)
        self.dtype = np.dtype(dtype)
        bin_path, idx_path = with_suffix(self.prefix, ".bin"), with_suffix(self.prefix, ".idx")
        self.lengths, n_tokens = _read_lengths(idx_path)  # (n,)
        held = bin_path.stat().st_size // self.dtype.itemsize
        if held != n_tokens:
            raise DatasetFileError(
                f"{self.prefix}: .bin holds {held} ids, .idx says {n_tokens} (damaged; "
                "prepare the data again)"
            )
        self._bin = os.open(bin_path, os.O_RDONLY)
        self._idx = os.open(idx_path, os.O_RDONLY)

    def __len__(self) -> int:
        return len(self.lengths)

    def __getitem__(self, i: int) -> np.ndarray:
        start, end = np.frombuffer(
            os.pread(self._idx, 2 * OFFSET.itemsize, i * OFFSET.itemsize), dtype=OFFSET
        )
        size = self.dtype.itemsize
        raw = os.pread(self._bin, int(end - start) * size, int(start) * size)
        return np.frombuffer(raw, dtype=self.dtype)

    def __del__(self) -> None:
        for fd in (getattr(self, "_bin", None), getattr(self, "_idx", None)):
            if fd is not None:
                os.close(fd)


class ShardedDataset:
    """Several ``IndexedDataset`` shards read as one: sentence i of the whole is sentence
    ``i - start[k]`` of shard k."""

    def __init__(self, shards: list[IndexedDataset]):
        self.shards = shards
        self.starts = np.cumsum([0] + [len(s) for s in shards])  # (K + 1,)
        self.lengths = np.concatenate([s.lengths for s in shards])  # (n,)
        for shard in shards:
            shard.lengths = shard.lengths[:0]  # held once, here

    def __len__(self) -> int:
        return int(self.starts[-1])

    def __getitem__(self, i: int) -> np.ndarray:
        k = int(np.searchsorted(self.starts, i, side="right")) - 1
        return self.shards[k][i - int(self.starts[k])]


def open_indexed(prefixes: Sequence[str | Path], dtype: np.dtype | str):
    """One shard as an ``IndexedDataset``, several as a ``ShardedDataset``."""
    shards = [IndexedDataset(p, dtype) for p in prefixes]
    return shards[0] if len(shards) == 1 else ShardedDataset(shards)


def _read_lengths(idx_path: Path) -> tuple[np.ndarray, int]:
    """Sentence lengths from the offsets, block by block (never all offsets at once), in
    the smallest type that holds them; and the total number of ids."""
    n = idx_path.stat().st_size // OFFSET.itemsize - 1
    if n < 0:
        raise DatasetFileError(f"{idx_path}: empty index (damaged; prepare the data again)")
    lengths = np.empty(n, dtype=np.int32)
    last, position = 0, 0
    with open(idx_path, "rb") as f:
        f.seek(OFFSET.itemsize)
        while block := f.read(LENGTHS_READ_AT_ONCE * OFFSET.itemsize):
            ends = np.frombuffer(block, dtype=OFFSET)
            step = np.diff(ends, prepend=last)
            if step.size and (step.min() < 0 or step.max() > np.iinfo(np.int32).max):
                bad = int(np.argmax((step < 0) | (step > np.iinfo(np.int32).max)))
                raise DatasetFileError(
                    f"{idx_path}: sentence {position + bad + 1} has length {int(step[bad])} "
                    "(the offsets are damaged; prepare the data again)"
                )
            lengths[position : position + len(ends)] = step
            position += len(ends)
            last = int(ends[-1])
    longest = int(lengths.max()) if n else 0
    return lengths.astype(length_dtype(longest), copy=False), last


def with_suffix(prefix: Path, suffix: str) -> Path:
    """``train.src`` + ``.bin`` -> ``train.src.bin`` (``Path.with_suffix`` would drop ``.src``)."""
    return prefix.with_name(prefix.name + suffix)
