"""Attention masks: bool, True = attend, broadcastable to (B, H, Tq, Tk).

This is the convention of ``torch.nn.functional.scaled_dot_product_attention``; every mask in
aiayn is built here and nowhere else.

Shapes: B batch, S source length, T target length, L cached length.
"""

from __future__ import annotations

import torch
from torch import Tensor


# --8<-- [start:padding_mask]
def padding_mask(tokens: Tensor, pad_id: int) -> Tensor:
    """Keys that are real tokens, not padding.

    Args:
        tokens: (B, S) token ids.
        pad_id: the padding id.

    Returns:
        (B, 1, 1, S) bool, True where ``tokens != pad_id``.
    """
    return (tokens != pad_id)[:, None, None, :]  # (B, 1, 1, S)


# --8<-- [end:padding_mask]


# --8<-- [start:causal_mask]
def causal_mask(length: int, *, offset: int = 0, device: torch.device | None = None) -> Tensor:
    """Look-ahead mask (§3.2.3): query i may attend key j only when j <= i.

    Args:
        length: number of new queries T.
        offset: number of earlier positions L already in the cache; queries sit at
            positions L .. L+T-1 and keys at 0 .. L+T-1.
        device: where to build the mask.

    Returns:
        (1, 1, T, L+T) bool.
    """
    query_pos = torch.arange(offset, offset + length, device=device)  # (T,)
    key_pos = torch.arange(offset + length, device=device)  # (L+T,)
    return (key_pos[None, :] <= query_pos[:, None])[None, None]  # (1, 1, T, L+T)


# --8<-- [end:causal_mask]


def decoder_self_mask(tgt: Tensor, pad_id: int, *, offset: int = 0) -> Tensor:
    """Causal mask combined with the target padding mask.

    Args:
        tgt: (B, T) target ids (the new positions only when ``offset > 0``).
        pad_id: the padding id.
        offset: cached length L.

    Returns:
        (B, 1, T, L+T) bool. Cached keys count as real tokens, and so does position 0, the
        decoder's start (which some models, Marian's, spell with the padding id).
    """
    causal = causal_mask(tgt.size(1), offset=offset, device=tgt.device)  # (1, 1, T, L+T)
    new_keys = padding_mask(tgt, pad_id)  # (B, 1, 1, T)
    if offset == 0:
        new_keys = new_keys.clone()
        new_keys[..., 0] = True
    cached_keys = new_keys.new_ones(tgt.size(0), 1, 1, offset)  # (B, 1, 1, L)
    return causal & torch.cat([cached_keys, new_keys], dim=-1)  # (B, 1, T, L+T)
