"""Scaled dot-product and multi-head attention (§3.2).

Shapes: B batch, T query length, S key length, D d_model, H heads, Dh = D / H.
Masks are bool, True = attend, broadcastable to (B, H, T, S) (see ``aiayn.masks``).
"""

from __future__ import annotations

import math
from collections.abc import Callable

import torch.nn.functional as F
from torch import Tensor, nn

from aiayn.modules.cache import KeyValues, MemoryKeyValues

AttentionFunction = Callable[..., tuple[Tensor, Tensor | None]]
"""What multi-head attention computes attention with: ``scaled_dot_product_attention``, or a
faster implementation of the same function and arguments (``aiayn.accel``)."""


# --8<-- [start:scaled_dot_product_attention]
def scaled_dot_product_attention(
    q: Tensor,
    k: Tensor,
    v: Tensor,
    *,
    mask: Tensor | None = None,
    dropout_p: float = 0.0,
    need_weights: bool = False,
) -> tuple[Tensor, Tensor | None]:
    """Attention(Q, K, V) = softmax(Q Kᵀ / √d_k) V  (§3.2.1, eq. 1).

    PyTorch's fused kernel computes it, unless the weights are asked for: then the eager
    form below, which returns them too.

    Args:
        q: (B, H, T, Dh) queries.
        k: (B, H, S, Dh) keys.
        v: (B, H, S, Dh) values.
        mask: bool, True = attend, broadcastable to (B, H, T, S); None attends everywhere.
        dropout_p: dropout on the attention weights (0 in eval).
        need_weights: return the (B, H, T, S) weights as well.

    Returns:
        (B, H, T, Dh) output, and the weights or None.
    """
    if not need_weights:
        return F.scaled_dot_product_attention(q, k, v, attn_mask=mask, dropout_p=dropout_p), None
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.size(-1))  # (B, H, T, S)
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    weights = scores.softmax(dim=-1)  # (B, H, T, S)
    return F.dropout(weights, dropout_p, training=dropout_p > 0) @ v, weights


# --8<-- [end:scaled_dot_product_attention]


# --8<-- [start:heads]
def split_heads(x: Tensor, n_heads: int) -> Tensor:
    """(B, T, D) -> (B, H, T, Dh)."""
    b, t, d = x.shape
    return x.view(b, t, n_heads, d // n_heads).transpose(1, 2)  # (B, H, T, Dh)


def merge_heads(x: Tensor) -> Tensor:
    """(B, H, T, Dh) -> (B, T, D): Concat(head_1, ..., head_h) of eq. (2)."""
    b, h, t, dh = x.shape
    return x.transpose(1, 2).reshape(b, t, h * dh)  # (B, T, D)


# --8<-- [end:heads]


class MultiHeadAttention(nn.Module):
    """What both attentions share (§3.2.2): H heads of d_model / H dimensions, dropout on
    the attention weights, and the function that computes attention."""

    def __init__(self, *, n_heads: int, dropout: float, attention: AttentionFunction):
        super().__init__()
        self.n_heads = n_heads
        self.dropout = dropout
        self.attention = attention

    def attend(
        self, q: Tensor, k: Tensor, v: Tensor, *, mask: Tensor | None, need_weights: bool
    ) -> tuple[Tensor, Tensor | None]:
        """(B, H, T, Dh) queries on (B, H, S, Dh) keys/values -> (B, T, D) heads concatenated
        (before W_O), and the (B, H, T, S) weights when asked."""
        dropout_p = self.dropout if self.training else 0.0
        out, weights = self.attention(
            q, k, v, mask=mask, dropout_p=dropout_p, need_weights=need_weights
        )
        return merge_heads(out), weights


class SelfAttention(MultiHeadAttention):
    """Multi-head self-attention (§3.2.2) with W_Q, W_K, W_V stacked into one projection.

    The stacked rows are [W_Q; W_K; W_V], the layout of ``nn.MultiheadAttention.in_proj_weight``.
    Keys and values of earlier positions can be passed in (``past``) and the extended ones
    are returned, so a caller can decode one position at a time.
    """

    def __init__(
        self,
        *,
        d_model: int,
        n_heads: int,
        dropout: float = 0.0,
        bias: bool = True,
        attention: AttentionFunction = scaled_dot_product_attention,
    ):
        super().__init__(n_heads=n_heads, dropout=dropout, attention=attention)
        self.qkv_proj = nn.Linear(d_model, 3 * d_model, bias=bias)  # [W_Q; W_K; W_V]
        self.out_proj = nn.Linear(d_model, d_model, bias=bias)  # W_O

    # --8<-- [start:self_attention]
    def forward(
        self,
        x: Tensor,
        *,
        mask: Tensor | None = None,
        past: KeyValues | None = None,
        need_weights: bool = False,
    ) -> tuple[Tensor, Tensor | None, KeyValues | None]:
        """Attend from ``x`` to itself, after the ``past`` keys/values if given.

        Args:
            x: (B, T, D).
            mask: bool, broadcastable to (B, H, T, L+T) where L is the past length.
            past: keys and values of L earlier positions (a decoding cache), or None.
            need_weights: also return the attention weights.

        Returns:
            (B, T, D) output, weights (B, H, T, L+T) or None, and ``past`` extended by the
            T new positions (None without ``past``).
        """
        b, t, d = x.shape
        qkv = self.qkv_proj(x).view(b, t, 3, self.n_heads, d // self.n_heads)  # (B, T, 3, H, Dh)
        q, k, v = qkv.permute(2, 0, 3, 1, 4).unbind(0)  # 3 × (B, H, T, Dh)
        kv = None if past is None else past.extended(k, v)
        if kv is not None:
            k, v = kv.keys, kv.values  # (B, H, L+T, Dh) each
        out, weights = self.attend(q, k, v, mask=mask, need_weights=need_weights)
        return self.out_proj(out), weights, kv

    # --8<-- [end:self_attention]


# --8<-- [start:cross_attention]
class CrossAttention(MultiHeadAttention):
    """Encoder–decoder attention (§3.2.3): queries from the decoder, keys and values from memory.

    Keys and values depend only on the encoder output, so ``project_memory`` computes them
    once and decoding steps reuse them.
    """

    def __init__(
        self,
        *,
        d_model: int,
        n_heads: int,
        dropout: float = 0.0,
        bias: bool = True,
        attention: AttentionFunction = scaled_dot_product_attention,
    ):
        super().__init__(n_heads=n_heads, dropout=dropout, attention=attention)
        self.q_proj = nn.Linear(d_model, d_model, bias=bias)  # W_Q
        self.kv_proj = nn.Linear(d_model, 2 * d_model, bias=bias)  # [W_K; W_V]
        self.out_proj = nn.Linear(d_model, d_model, bias=bias)  # W_O

    def project_memory(self, memory: Tensor) -> MemoryKeyValues:
        """(B, S, D) encoder output -> keys and values, (B, H, S, Dh) each.

        They are made contiguous here, once, rather than by every decoding step's matmul.
        """
        b, s, d = memory.shape
        kv = self.kv_proj(memory).view(b, s, 2, self.n_heads, d // self.n_heads)  # (B,S,2,H,Dh)
        k, v = kv.permute(2, 0, 3, 1, 4).contiguous().unbind(0)  # 2 × (B, H, S, Dh)
        return MemoryKeyValues(k, v)

    def forward(
        self,
        x: Tensor,
        memory_kv: MemoryKeyValues,
        *,
        mask: Tensor | None = None,
        need_weights: bool = False,
    ) -> tuple[Tensor, Tensor | None]:
        """Attend from decoder states ``x`` (B, T, D) to the projected memory.

        Args:
            x: (B, T, D) decoder states.
            memory_kv: keys and values from ``project_memory``, (B, H, S, Dh) each.
            mask: bool, broadcastable to (B, H, T, S): the source padding.
            need_weights: also return the attention weights.

        Returns:
            (B, T, D) output and weights (B, H, T, S) or None.
        """
        q = split_heads(self.q_proj(x), self.n_heads)  # (B, H, T, Dh)
        out, weights = self.attend(
            q, memory_kv.keys, memory_kv.values, mask=mask, need_weights=need_weights
        )
        return self.out_proj(out), weights


# --8<-- [end:cross_attention]
