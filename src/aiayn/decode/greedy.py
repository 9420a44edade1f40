"""Greedy decoding with the KV cache: each step feeds only the newest token.

Shapes: B batch, S source length, T output length.
"""

from __future__ import annotations

import torch
from torch import Tensor

from aiayn.config import BOS_ID, EOS_ID, PAD_ID
from aiayn.models.transformer import Transformer


@torch.inference_mode()
def greedy_decode(
    model: Transformer, src: Tensor, *, max_len: int | None = None, max_len_b: int = 50
) -> Tensor:
    """Pick the most probable token at every step until each sentence has emitted EOS.

    Args:
        model: an encoder–decoder Transformer in eval mode.
        src: (B, S) source ids, right-padded with PAD.
        max_len: at most this many output tokens; default source length + ``max_len_b`` (§6.1).
        max_len_b: the additive length allowance when ``max_len`` is None.

    Returns:
        (B, T) output ids without BOS, each row ending with EOS (if reached) then PAD.
    """
    src_mask = model.source_mask(src)
    memory = model.encode(src, src_mask)
    cache = model.start_cache(memory)
    b = src.size(0)
    limit = max_len if max_len is not None else src.size(1) + max_len_b
    token = torch.full((b, 1), BOS_ID, dtype=torch.long, device=src.device)  # (B, 1)
    finished = torch.zeros(b, dtype=torch.bool, device=src.device)
    out = []
    for _ in range(limit):
        logits, cache = model.decode(token, memory, src_mask, cache=cache)  # (B, 1, V)
        token = logits[:, -1].argmax(dim=-1, keepdim=True)  # (B, 1)
        token = token.masked_fill(finished[:, None], PAD_ID)
        out.append(token)
        finished |= token.squeeze(1) == EOS_ID
        if finished.all():
            break
    return torch.cat(out, dim=1)  # (B, T)
