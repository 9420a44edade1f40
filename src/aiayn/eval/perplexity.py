"""Perplexity of a language model on a token stream."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import torch
import torch.nn.functional as F

from aiayn.data.blocks import sequential_blocks
from aiayn.data.corpus import CorpusError
from aiayn.models.lm import TransformerLM


@dataclass(frozen=True)
class Perplexity:
    nll: float  # mean negative log-likelihood per predicted token (nats)
    tokens: int  # predicted tokens

    @property
    def perplexity(self) -> float:
        return math.exp(self.nll)

    def bits_per_character(self, characters: int) -> float:
        return self.nll * self.tokens / characters / math.log(2)


@torch.inference_mode()
def stream_perplexity(
    model: TransformerLM, ids: np.ndarray, *, block_size: int, batch_size: int = 16
) -> Perplexity:
    """Mean NLL over consecutive, non-overlapping blocks of ``block_size`` tokens."""
    model.eval()
    device = next(model.parameters()).device
    total, count = 0.0, 0
    for x, y in sequential_blocks(ids, block_size=block_size, batch_size=batch_size):
        logits = model(x.to(device))  # (B, T, V)
        total += float(
            F.cross_entropy(logits.flatten(0, 1).float(), y.flatten().to(device), reduction="sum")
        )
        count += y.numel()
    if count == 0:
        raise CorpusError(f"the text is shorter than one block of {block_size} tokens + 1")
    return Perplexity(total / count, count)
