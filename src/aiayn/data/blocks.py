"""Batches of a language model's token stream (``aiayn.data.lm_stream``): random contiguous blocks
for training, consecutive ones for an exact validation loss.

Shapes: B blocks in a batch, T block size.
"""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np
import torch
from torch import Tensor

from aiayn.data.corpus import CorpusError


def random_blocks(
    stream: np.ndarray, *, block_size: int, batch_size: int, generator: torch.Generator
) -> tuple[Tensor, Tensor]:
    """A batch of random contiguous blocks: inputs (B, T) and next-token targets (B, T)."""
    if len(stream) <= block_size:
        raise CorpusError(f"the token stream ({len(stream)}) is shorter than a block + 1")
    starts = torch.randint(len(stream) - block_size, (batch_size,), generator=generator)
    return _inputs_and_targets(stream, starts.tolist(), block_size)


def sequential_blocks(
    stream: np.ndarray, *, block_size: int, batch_size: int
) -> Iterator[tuple[Tensor, Tensor]]:
    """Non-overlapping blocks covering the stream once, for an exact validation loss."""
    n_blocks = (len(stream) - 1) // block_size
    for first in range(0, n_blocks, batch_size):
        count = min(batch_size, n_blocks - first)
        starts = [(first + i) * block_size for i in range(count)]
        yield _inputs_and_targets(stream, starts, block_size)


def _inputs_and_targets(
    stream: np.ndarray, starts: list[int], block_size: int
) -> tuple[Tensor, Tensor]:
    """The blocks of ``block_size`` + 1 tokens at ``starts``: inputs (B, T) and the next
    tokens as targets (B, T)."""
    rows = np.stack([stream[s : s + block_size + 1] for s in starts]).astype(np.int64)
    block = torch.from_numpy(rows)  # (B, T + 1)
    return block[:, :-1], block[:, 1:]
