"""Sampling the next token: temperature, top-k and nucleus (top-p) filtering.

Shapes: N rows, V vocabulary.
"""

from __future__ import annotations

import torch
from torch import Tensor


def filter_logits(logits: Tensor, *, top_k: int = 0, top_p: float = 1.0) -> Tensor:
    """Set to -inf every logit outside the top ``top_k`` and outside the smallest set whose
    probability reaches ``top_p`` (Holtzman et al., 2020). 0 and 1.0 switch them off."""
    logits = logits.clone()
    if top_k > 0:
        kth = logits.topk(min(top_k, logits.size(-1)), dim=-1).values[:, -1:]  # (N, 1)
        logits[logits < kth] = float("-inf")
    if top_p < 1.0:
        sorted_logits, order = logits.sort(dim=-1, descending=True)  # (N, V) each
        cumulative = sorted_logits.softmax(dim=-1).cumsum(dim=-1)
        outside = cumulative - sorted_logits.softmax(dim=-1) >= top_p  # mass before it ≥ p
        logits.scatter_(-1, order, sorted_logits.masked_fill(outside, float("-inf")))
    return logits


def sample_next(
    logits: Tensor,
    *,
    temperature: float = 1.0,
    top_k: int = 0,
    top_p: float = 1.0,
    generator: torch.Generator | None = None,
) -> Tensor:
    """Draw one token per row from (N, V) logits; temperature 0 is greedy. Returns (N,)."""
    if temperature < 0:
        raise ValueError(f"temperature must be >= 0, got {temperature}")
    if not 0.0 < top_p <= 1.0:
        raise ValueError(f"top_p must be in (0, 1], got {top_p}")
    if temperature == 0:
        return logits.argmax(dim=-1)
    filtered = filter_logits(logits.float() / temperature, top_k=top_k, top_p=top_p)
    probs = filtered.softmax(dim=-1)  # (N, V)
    return torch.multinomial(probs, 1, generator=generator).squeeze(1)
