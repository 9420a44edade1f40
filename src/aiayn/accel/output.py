"""A decoding step's output: next-token log-probabilities from the final decoder states.

Replaces ``log_softmax(model.output(hidden))`` in decoding: the log-softmax overwrites the
logits instead of writing a second (N, V) table, where PyTorch's CPU kernel allows it (a tiny
model's beam search is ~6% faster). The pre-softmax projection, the largest matrix product
of a step, is packed once with the rest of the decoding copy (``aiayn.accel.packed``).

Shapes: N rows, D d_model, V vocabulary.
"""

from __future__ import annotations

import functools

import torch
from torch import Tensor


def log_probs_in_place(logits: Tensor) -> Tensor:
    """(N, V) logits -> (N, V) float32 log-probabilities, over the logits where possible."""
    logits = logits.float()
    if logits.device.type == "cpu" and _log_softmax_can_overwrite(logits.size(-1)):
        return torch.log_softmax(logits, dim=-1, out=logits)
    return logits.log_softmax(dim=-1)


@functools.cache
def _log_softmax_can_overwrite(width: int) -> bool:
    """Whether PyTorch's CPU log-softmax may write its result over its input, checked once
    per row width on this PyTorch: its kernel reads a row before writing it, which is not
    a documented promise."""
    x = torch.randn(3, width, generator=torch.Generator().manual_seed(0))
    expected = x.log_softmax(dim=-1)
    try:
        torch.log_softmax(x, dim=-1, out=x)
    except RuntimeError:
        return False
    return torch.equal(x, expected)
