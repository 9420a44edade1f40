"""Binary token datasets: ids in one flat array, sentence boundaries in an offsets array.

``PREFIX.bin`` holds the ids of every sentence back to back; ``PREFIX.idx`` holds int64
offsets (n + 1 of them) so sentence i is ``bin[idx[i]:idx[i+1]]``. Both are opened as numpy
memmaps, so a corpus larger than memory is never read into Python objects.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np


def token_dtype(vocab_size: int) -> np.dtype:
    """The smallest unsigned type that holds every id."""
    return np.dtype(np.uint16) if vocab_size <= np.iinfo(np.uint16).max + 1 else np.dtype(np.int32)


class IndexedWriter:
    """Appends sentences to ``PREFIX.bin`` and records offsets; ``close`` writes ``PREFIX.idx``."""

    def __init__(self, prefix: str | Path, dtype: np.dtype):
        self.prefix = Path(prefix)
        self.dtype = dtype
        self._bin = open(_with(self.prefix, ".bin"), "wb")  # noqa: SIM115
        self._lengths: list[int] = []

    def add(self, sentences: Sequence[Sequence[int]]) -> None:
        if not sentences:
            return
        flat = np.fromiter((i for s in sentences for i in s), dtype=self.dtype)
        self._bin.write(flat.tobytes())
        self._lengths.extend(len(s) for s in sentences)

    def close(self) -> int:
        """Finish both files; return the number of sentences."""
        self._bin.close()
        offsets = np.zeros(len(self._lengths) + 1, dtype=np.int64)
        np.cumsum(self._lengths, out=offsets[1:])
        offsets.tofile(_with(self.prefix, ".idx"))
        return len(self._lengths)


class IndexedDataset:
    """Read-only, memory-mapped view of a ``PREFIX.bin`` / ``PREFIX.idx`` pair."""

    def __init__(self, prefix: str | Path, dtype: np.dtype | str):
        self.prefix = Path(prefix)
        self.offsets = np.memmap(_with(self.prefix, ".idx"), dtype=np.int64, mode="r")
        n_tokens = int(self.offsets[-1])
        self.tokens = (
            np.memmap(_with(self.prefix, ".bin"), dtype=np.dtype(dtype), mode="r")
            if n_tokens
            else np.zeros(0, dtype=np.dtype(dtype))
        )
        if self.tokens.size != n_tokens:
            raise ValueError(
                f"{self.prefix}: .bin holds {self.tokens.size} ids, .idx says {n_tokens}"
            )
        self.lengths = np.diff(self.offsets).astype(np.int32)  # (n,)

    def __len__(self) -> int:
        return len(self.offsets) - 1

    def __getitem__(self, i: int) -> np.ndarray:
        return self.tokens[self.offsets[i] : self.offsets[i + 1]]


def _with(prefix: Path, suffix: str) -> Path:
    """``train.src`` + ``.bin`` -> ``train.src.bin`` (``Path.with_suffix`` would drop ``.src``)."""
    return prefix.with_name(prefix.name + suffix)
