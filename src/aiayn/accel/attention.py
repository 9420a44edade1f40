"""Scaled dot-product attention on CPU: replaces ``aiayn.modules.scaled_dot_product_attention``
(same function, same arguments), choosing the faster of two ways to compute it. Named after
``aiayn.modules.attention``, whose function it speeds up.

Why: on CPU, PyTorch's fused kernel is several times slower than two batched matrix products
in bfloat16 and float16 for sentence-length sequences, and for a few queries per row, as in
incremental decoding; without autograd the eager path is faster in float32 too, up to ~64
keys. The eager path scales, masks and casts the scores to float32 in one operation
(``torch.add`` of an additive mask) rather than dividing and filling bfloat16 scores before
a cast. Its softmax works around two slow paths of PyTorch's CPU kernels
(``padded_softmax``). Elsewhere (GPUs) the fused kernel is used.

Measured: 76 vs 11 ms forward + backward for 540 rows × 4 heads × 16 positions in bfloat16
(fused vs eager; ``bench/train.py`` shows it in whole steps).

Shapes: B batch, H heads, T queries, S keys, Dh head dim.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import Tensor

from aiayn.accel.dropout import uniform_dropout
from aiayn.modules.attention import scaled_dot_product_attention

MAX_EAGER_QUERIES = 8  # on CPU, attention for at most this many queries per row is eager
MAX_EAGER_KEYS_WITHOUT_GRAD = 64  # on CPU without autograd, float32 attention over at most
# this many keys is eager: sentence-length inference (encoders, validation losses)
MIN_SOFTMAX_SPAN = 16  # on CPU, shorter softmax rows are computed over this many positions


def cpu_attention(
    q: Tensor,
    k: Tensor,
    v: Tensor,
    *,
    mask: Tensor | None = None,
    dropout_p: float = 0.0,
    need_weights: bool = False,
) -> tuple[Tensor, Tensor | None]:
    """softmax(Q Kᵀ / √d_k) V (§3.2.1, eq. 1): ``aiayn.modules.scaled_dot_product_attention``
    computed eagerly where that is faster on CPU (``eager_is_faster``)."""
    if not need_weights and not eager_is_faster(q, k):
        return scaled_dot_product_attention(q, k, v, mask=mask, dropout_p=dropout_p)
    out, weights = biased_attention(
        q, k.transpose(-2, -1), v, additive_mask(mask, q.device), dropout_p=dropout_p
    )
    return out, (weights if need_weights else None)


def biased_attention(
    q: Tensor, keys_t: Tensor, values: Tensor, bias: Tensor, *, dropout_p: float = 0.0
) -> tuple[Tensor, Tensor]:
    """softmax(Q Kᵀ / √d_k + bias) V (§3.2.1, eq. 1), the mask given as a float32 bias
    (``additive_mask``): the eager attention of ``cpu_attention`` and of the token step
    (``aiayn.accel.token_step``).

    The scores are scaled, masked and cast to float32 in one ``torch.add``, and the
    softmax is ``padded_softmax``. Rows already flat (the token step's (R, T, Dh)) are
    multiplied by ``torch.bmm``, not ``torch.matmul``: 13 vs 17 µs a call for (256, 1, 32)
    by (256, 32, 16), 2 threads (``bench/decode.py --sizes tiny`` shows it in whole steps).

    Args:
        q: (..., T, Dh) queries.
        keys_t: (..., Dh, S) keys, transposed.
        values: (..., S, Dh) values.
        bias: float32, broadcastable to (..., T, S): 0 where a query attends, -inf elsewhere.
        dropout_p: dropout on the attention weights.

    Returns:
        (..., T, Dh) output, and the (..., T, S) weights, both in the dtype of ``q``.
    """
    product = torch.bmm if q.dim() == 3 else torch.matmul
    scores = product(q, keys_t)  # (..., T, S), not yet scaled
    logits = torch.add(bias, scores, alpha=1 / math.sqrt(q.size(-1)))  # float32 (..., T, S)
    weights = padded_softmax(logits)  # float32 (..., T, S)
    if weights.dtype != q.dtype:
        weights = weights.to(q.dtype)
    if dropout_p > 0:
        return product(uniform_dropout(weights, dropout_p, training=True), values), weights
    return product(weights, values), weights  # (..., T, Dh)


def additive_mask(mask: Tensor | None, device: torch.device) -> Tensor:
    """A bool mask (True = attend) as float32 0 / -inf to add to the scores; without a mask,
    a float32 zero of shape (1, 1, 1, 1), so that scaling the scores also casts them."""
    if mask is None:
        return torch.zeros(1, 1, 1, 1, device=device)
    return torch.where(mask, 0.0, float("-inf"))


def eager_is_faster(q: Tensor, k: Tensor) -> bool:
    """True on CPU in half precision, for at most ``MAX_EAGER_QUERIES`` queries per row, or
    without autograd over at most ``MAX_EAGER_KEYS_WITHOUT_GRAD`` keys."""
    if q.device.type != "cpu":
        return False
    if q.dtype in (torch.bfloat16, torch.float16) or q.size(-2) <= MAX_EAGER_QUERIES:
        return True
    return not torch.is_grad_enabled() and k.size(-2) <= MAX_EAGER_KEYS_WITHOUT_GRAD


def padded_softmax(scores: Tensor) -> Tensor:
    """softmax over the last dimension, around two slow paths of PyTorch's CPU kernels.

    On CPU, rows shorter than 16 take a scalar path about 7× slower, forward and backward,
    than the same rows padded to 16 with -inf; and bfloat16 softmax is 2–4× slower than
    float32 (measured here, 2 threads: 13.4 vs 3.3 ms forward + backward for 65k rows of 15
    in float32; 3.2 vs 0.85 ms for 8k rows of 16 in bfloat16). Both are worked around here;
    the result is the same function, in the dtype of ``scores``.
    """
    length = scores.size(-1)
    if length >= MIN_SOFTMAX_SPAN and scores.dtype == torch.float32:
        return scores.softmax(dim=-1)  # neither slow path
    if scores.device.type != "cpu":
        return scores.softmax(dim=-1)
    x = scores.float()
    if length >= MIN_SOFTMAX_SPAN:
        return x.softmax(dim=-1).to(scores.dtype)
    x = F.pad(x, (0, MIN_SOFTMAX_SPAN - length), value=float("-inf"))
    return x.softmax(dim=-1)[..., :length].to(scores.dtype)
