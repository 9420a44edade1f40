"""Label-smoothed cross-entropy (§5.4) fused with the output projection: replaces
``aiayn.modules.loss.label_smoothed_nll`` (the same function of the final states).

Why: a batch of 8k target tokens and a 10k vocabulary has 82M logits (328 MB in float32). On a CPU
every pass over them is memory-bound, and autograd makes several (softmax, its backward, the
gather's zero-filled gradient, the mean's gradient). Here the logits are computed a few rows
at a time, and each chunk's loss and gradient, softmax(logits) - q, are formed while it is in
cache; only the gradients with respect to the hidden states and the projection are kept. The
arithmetic is the same three matrix products as the unfused computation.

On a GPU the same loop runs with large chunks: each chunk is a few kernel launches, and
small chunks leave a step launch-bound (H100, base: 240k target tokens/s with 256 rows,
349k with 8,192: ``bench/train.py --device cuda``).

Shapes: N real (non-pad) target tokens, D d_model, V vocabulary, C rows per chunk, C' ≥ C
the rows its matrix products run on.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor

from aiayn.modules.embedding import OutputProjection
from aiayn.modules.loss import label_smoothed_nll

CPU_CHUNK_ROWS = 256  # rows of logits per chunk on the CPU: a chunk stays in cache
GPU_CHUNK_ROWS = 8192  # elsewhere: few kernel launches per batch (8,192 × 32k bf16 = 0.5 GB)
# A chunk's matrix products run on a multiple of this many rows, the last chunk padded with
# zero rows. Why: oneDNN compiles and keeps a kernel per row count, and the last chunk of a
# batch has as many row counts as the batches have token counts (~1 MiB of kept kernels per
# count at Transformer-Tiny's 10,000 × 128). Padded, the Multi30k recipe's run peaks at
# 1,027 MiB instead of 1,357-1,457 (``bench/long_run.py measure``).
CHUNK_ROWS_MULTIPLE = 32


def fused_loss(
    hidden: Tensor, output: OutputProjection, target: Tensor, *, epsilon: float
) -> tuple[Tensor, Tensor]:
    """``label_smoothed_nll`` computed by ``fused_label_smoothed_nll``; a projection with a
    bias (Marian's ``final_logits_bias``), which the fused kernel has no term for, takes the
    plain path."""
    if output.bias is not None:
        return label_smoothed_nll(hidden, output, target, epsilon=epsilon)
    return fused_label_smoothed_nll(hidden, output.weight, target, epsilon=epsilon)


def fused_label_smoothed_nll(
    hidden: Tensor,
    weight: Tensor,
    target: Tensor,
    *,
    epsilon: float,
    chunk_rows: int | None = None,
) -> tuple[Tensor, Tensor]:
    """Summed label-smoothed loss and summed NLL of ``softmax(hidden @ weightᵀ)``.

    Args:
        hidden: (N, D) final decoder states of the real target positions.
        weight: (V, D) the pre-softmax projection (the tied embedding, §3.4).
        target: (N,) reference ids.
        epsilon: ε_ls.
        chunk_rows: C, rows of logits formed at a time (default: ``CPU_CHUNK_ROWS`` on the
            CPU, ``GPU_CHUNK_ROWS`` elsewhere).

    Returns:
        (loss_sum, nll_sum); only ``loss_sum`` carries gradients. Under autocast the logits
        and their softmax stay in the autocast dtype (the gradient enters a bfloat16 matrix
        product either way; skipping two float32 round trips per chunk is ~20% faster);
        sums and the returned losses are float32.
    """
    device_type = hidden.device.type
    if chunk_rows is None:
        chunk_rows = CPU_CHUNK_ROWS if device_type == "cpu" else GPU_CHUNK_ROWS
    dtype = (
        torch.get_autocast_dtype(device_type)
        if torch.is_autocast_enabled(device_type)
        else hidden.dtype
    )
    return _FusedLinearCrossEntropy.apply(hidden, weight, target, epsilon, chunk_rows, dtype)


class _FusedLinearCrossEntropy(torch.autograd.Function):
    @staticmethod
    def forward(ctx, hidden, weight, target, epsilon, chunk_rows, dtype):
        needs_grad = hidden.requires_grad or weight.requires_grad
        with torch.autocast(hidden.device.type, enabled=False):
            loss, nll, grad_hidden, grad_weight = _chunked(
                hidden, weight, target, epsilon, chunk_rows, dtype, needs_grad
            )
        ctx.mark_non_differentiable(nll)
        ctx.save_for_backward(grad_hidden, grad_weight)
        return loss, nll

    @staticmethod
    def backward(ctx, grad_loss, _grad_nll):
        grad_hidden, grad_weight = ctx.saved_tensors
        return grad_hidden * grad_loss, grad_weight * grad_loss, None, None, None, None


def _chunked(hidden, weight, target, epsilon, chunk_rows, dtype, needs_grad):
    n, v = hidden.size(0), weight.size(0)
    h, w = hidden.to(dtype), weight.to(dtype)
    loss = torch.zeros((), dtype=torch.float32, device=hidden.device)
    nll = torch.zeros((), dtype=torch.float32, device=hidden.device)
    grad_hidden = torch.empty_like(hidden) if needs_grad else hidden.new_empty(0)
    grad_weight = (
        torch.zeros(weight.shape, dtype=torch.float32, device=weight.device)
        if needs_grad
        else weight.new_empty(0)
    )
    for rows, padded_rows in chunks(n, chunk_rows):
        c = rows.stop - rows.start
        h_c, t_c = h[rows], target[rows]  # (C, D), (C,)
        if padded_rows > c:
            h_c = F.pad(h_c, (0, 0, 0, padded_rows - c))  # (C', D)
        padded_logits = h_c @ w.T  # (C', V); rows past C are zeros
        logits = padded_logits[:c]  # (C, V)
        logits -= logits.amax(dim=-1, keepdim=True)  # shifted: softmax is unchanged
        picked = logits.gather(1, t_c[:, None]).squeeze(1).float()  # (C,)
        mean = logits.mean(dim=-1, dtype=torch.float32)  # (C,)
        probs = logits.exp_()  # (C, V), unnormalised
        total = probs.sum(dim=-1, dtype=torch.float32)  # (C,)
        log_z = total.log()
        nll_c = log_z - picked  # -log p(y)
        loss += ((1.0 - epsilon) * nll_c + epsilon * (log_z - mean)).sum()
        nll += nll_c.sum()
        if needs_grad:
            grad = probs.div_(total[:, None].to(dtype)).sub_(epsilon / v)  # softmax - ε/V
            grad[torch.arange(grad.size(0), device=grad.device), t_c] -= 1.0 - epsilon
            padded_logits[c:] = 0.0  # (C', V): grad, then zero rows adding nothing
            grad_hidden[rows] = (padded_logits @ w)[:c]  # (C, D)
            grad_weight += (padded_logits.T @ h_c).float()  # (V, D)
    return loss, nll, grad_hidden, grad_weight.to(weight.dtype)


def chunks(n: int, chunk_rows: int) -> list[tuple[slice, int]]:
    """The rows of each chunk of ``n`` rows, and the rows its products run on: the chunk's
    count rounded up to a multiple of ``CHUNK_ROWS_MULTIPLE``."""
    bounds = [slice(start, min(start + chunk_rows, n)) for start in range(0, n, chunk_rows)]
    multiple = CHUNK_ROWS_MULTIPLE
    return [(rows, -(-(rows.stop - rows.start) // multiple) * multiple) for rows in bounds]
