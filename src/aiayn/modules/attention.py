"""Scaled dot-product and multi-head attention (§3.2).

Shapes: B batch, T query length, S key length, D d_model, H heads, Dh = D / H.
Masks are bool, True = attend, broadcastable to (B, H, T, S) (see ``aiayn.masks``).
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from aiayn.modules.dropout import dropout
from aiayn.modules.kv_buffer import KeyValueBuffer

KeyValue = tuple[Tensor, Tensor]  # (B, H, S, Dh) each
MAX_EAGER_QUERIES = 8  # on CPU, attention for at most this many queries per row is eager
SHORTEST_FAST_SOFTMAX = 16  # on CPU, shorter softmax rows are padded to this length


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

    Without ``need_weights`` this is PyTorch's fused kernel; with it, an eager path that
    also returns the attention weights. Both compute the same function. On CPU in bfloat16
    or float16 the eager path is used throughout: there PyTorch's fused kernel is several
    times slower than two batched matrix products for sentence-length sequences (measured
    here: 76 ms vs 11 ms forward + backward for 540 × 4 heads × 16 positions).

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
    if not need_weights and not _eager_is_faster(q):
        out = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, dropout_p=dropout_p)
        return out, None
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.size(-1))  # (B, H, T, S)
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    weights = _softmax(scores)  # (B, H, T, S)
    out = dropout(weights, dropout_p, training=dropout_p > 0) @ v  # (B, H, T, Dh)
    return out, (weights if need_weights else None)


def _softmax(scores: Tensor) -> Tensor:
    """softmax over the last dimension, around two slow paths of PyTorch's CPU kernels.

    On CPU, rows shorter than 16 take a scalar path about 7× slower, forward and backward,
    than the same rows padded to 16 with -inf; and bfloat16 softmax is 2–4× slower than
    float32 (measured here, 2 threads: 13.4 vs 3.3 ms forward + backward for 65k rows of 15
    in float32; 3.2 vs 0.85 ms for 8k rows of 16 in bfloat16). Both are worked around here;
    the result is the same function, in the dtype of ``scores``.
    """
    if scores.device.type != "cpu":
        return scores.softmax(dim=-1)
    length = scores.size(-1)
    x = scores.float()
    if length < SHORTEST_FAST_SOFTMAX:
        x = F.pad(x, (0, SHORTEST_FAST_SOFTMAX - length), value=float("-inf"))
    return x.softmax(dim=-1)[..., :length].to(scores.dtype)


def _eager_is_faster(q: Tensor) -> bool:
    """On CPU, two batched matmuls beat PyTorch's fused kernel in half precision, and for a
    few queries per row, as in incremental decoding (measured here, fp32, 2 threads: 175 vs
    308 µs for 320 rows × 1 query × 20 keys; 149 vs 442 µs for 64 × 5 beam queries × 16)."""
    if q.device.type != "cpu":
        return False
    return q.dtype in (torch.bfloat16, torch.float16) or q.size(-2) <= MAX_EAGER_QUERIES


def split_heads(x: Tensor, n_heads: int) -> Tensor:
    """(B, T, D) -> (B, H, T, Dh)."""
    b, t, d = x.shape
    return x.view(b, t, n_heads, d // n_heads).transpose(1, 2)  # (B, H, T, Dh)


def merge_heads(x: Tensor) -> Tensor:
    """(B, H, T, Dh) -> (B, T, D): Concat(head_1, ..., head_h) of eq. (2)."""
    b, h, t, dh = x.shape
    return x.transpose(1, 2).reshape(b, t, h * dh)  # (B, T, D)


class SelfAttention(nn.Module):
    """Multi-head self-attention (§3.2.2) with W_Q, W_K, W_V stacked into one projection.

    The stacked rows are [W_Q; W_K; W_V], the layout of ``nn.MultiheadAttention.in_proj_weight``.
    Keys and values of earlier positions can be passed in (``past``) and the extended ones
    are returned, so a caller can decode one position at a time.
    """

    def __init__(self, *, d_model: int, n_heads: int, dropout: float = 0.0, bias: bool = True):
        super().__init__()
        self.n_heads = n_heads
        self.dropout = dropout
        self.qkv_proj = nn.Linear(d_model, 3 * d_model, bias=bias)  # [W_Q; W_K; W_V]
        self.out_proj = nn.Linear(d_model, d_model, bias=bias)  # W_O

    def forward(
        self,
        x: Tensor,
        *,
        mask: Tensor | None = None,
        past: KeyValueBuffer | None = None,
        need_weights: bool = False,
    ) -> tuple[Tensor, Tensor | None, KeyValueBuffer]:
        """Attend from ``x`` to itself (and to ``past`` keys/values).

        Args:
            x: (B, T, D).
            mask: bool, broadcastable to (B, H, T, L+T) where L is the past length.
            past: keys and values of L earlier positions, (B, H, L, Dh) each.
            need_weights: also return the attention weights.

        Returns:
            (B, T, D) output, weights (B, H, T, L+T) or None, and keys/values (B, H, L+T, Dh).
        """
        b, t, d = x.shape
        qkv = self.qkv_proj(x).view(b, t, 3, self.n_heads, d // self.n_heads)  # (B, T, 3, H, Dh)
        q, k, v = qkv.permute(2, 0, 3, 1, 4).unbind(0)  # 3 × (B, H, T, Dh)
        kv = KeyValueBuffer.wrap(k, v) if past is None else past.extended(k, v)
        dropout_p = self.dropout if self.training else 0.0
        out, weights = scaled_dot_product_attention(
            q, kv.keys, kv.values, mask=mask, dropout_p=dropout_p, need_weights=need_weights
        )
        return self.out_proj(merge_heads(out)), weights, kv


class CrossAttention(nn.Module):
    """Encoder–decoder attention (§3.2.3): queries from the decoder, keys and values from memory.

    Keys and values depend only on the encoder output, so ``project_memory`` computes them
    once per sentence and decoding steps reuse them.
    """

    def __init__(self, *, d_model: int, n_heads: int, dropout: float = 0.0, bias: bool = True):
        super().__init__()
        self.n_heads = n_heads
        self.dropout = dropout
        self.q_proj = nn.Linear(d_model, d_model, bias=bias)  # W_Q
        self.kv_proj = nn.Linear(d_model, 2 * d_model, bias=bias)  # [W_K; W_V]
        self.out_proj = nn.Linear(d_model, d_model, bias=bias)  # W_O

    def project_memory(self, memory: Tensor) -> KeyValue:
        """(B, S, D) encoder output -> keys and values, (B, H, S, Dh) each.

        They are made contiguous here, once, rather than by every decoding step's matmul.
        """
        b, s, d = memory.shape
        kv = self.kv_proj(memory).view(b, s, 2, self.n_heads, d // self.n_heads)  # (B,S,2,H,Dh)
        k, v = kv.permute(2, 0, 3, 1, 4).contiguous().unbind(0)  # 2 × (B, H, S, Dh)
        return k, v

    def forward(
        self,
        x: Tensor,
        memory_kv: KeyValue,
        *,
        mask: Tensor | None = None,
        need_weights: bool = False,
    ) -> tuple[Tensor, Tensor | None]:
        """Attend from decoder states ``x`` (N, T, D) to projected memory of B sentences.

        N = B·K: the K consecutive rows b·K .. b·K+K-1 (beams of sentence b) share its
        memory. Their K·T queries attend to it together, so memory keys/values are stored
        and read once per sentence, not once per beam.

        Args:
            x: (N, T, D) decoder states.
            memory_kv: keys and values from ``project_memory``, (B, H, S, Dh) each.
            mask: bool, broadcastable to (B, H, 1, S): the source padding of each sentence.
            need_weights: also return the attention weights.

        Returns:
            (N, T, D) output and weights (N, H, T, S) or None.
        """
        q = split_heads(self.q_proj(x), self.n_heads)  # (N, H, T, Dh)
        k, v = memory_kv
        n, h, t, dh = q.shape
        b = k.size(0)
        q = q.view(b, n // b, h, t, dh).transpose(1, 2).reshape(b, h, -1, dh)  # (B, H, K·T, Dh)
        dropout_p = self.dropout if self.training else 0.0
        out, weights = scaled_dot_product_attention(
            q, k, v, mask=mask, dropout_p=dropout_p, need_weights=need_weights
        )
        out = _rows_per_beam(out, n)  # (N, H, T, Dh)
        if weights is not None:
            weights = _rows_per_beam(weights, n)  # (N, H, T, S)
        return self.out_proj(merge_heads(out)), weights


def _rows_per_beam(x: Tensor, n: int) -> Tensor:
    """(B, H, K·T, E) -> (N, H, T, E) with N = B·K: undo the grouping of beam queries."""
    b, h, kt, e = x.shape
    k = n // b
    return x.view(b, h, k, kt // k, e).transpose(1, 2).reshape(n, h, kt // k, e)
