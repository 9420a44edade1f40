"""A decoding step's output: next-token log-probabilities from the final decoder states.

Replaces ``log_softmax(model.output(hidden))`` in decoding: the log-softmax overwrites the
logits instead of writing a second (N, V) table, where PyTorch's CPU kernel allows it (a tiny
model's beam search is ~6% faster). The pre-softmax projection, the largest matrix product
of a step, is packed once with the rest of the decoding copy (``aiayn.accel.packed``).

``output_rows`` makes a vocabulary shortlist's projection (``aiayn.accel.shortlist``): some
rows of the output projection, packed or quantised as the projection itself is.

Shapes: N rows, D d_model, V vocabulary, K rows kept.
"""

from __future__ import annotations

import functools

import torch
from torch import Tensor, nn

from aiayn.accel.int8 import Int8Linear
from aiayn.accel.packed import PackedFromRows, PackedLinear
from aiayn.modules.stepper import linear_rows


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


def output_rows(projection: nn.Module, rows: Tensor) -> nn.Module:
    """The rows ``rows`` (K,) of ``projection`` (D -> V: an ``nn.Linear``, or the
    ``PackedLinear``, ``PackedFromRows`` or ``Int8Linear`` of a decoding copy) as a map
    D -> K of the same kind: packed in the same dtype, or quantised per output row (the rows'
    scales are the full weight's: the same int8 weights)."""
    if isinstance(projection, PackedFromRows):
        projection = projection.packed
    linear = linear_rows(projection.weight, projection.bias, rows)  # D -> K
    if isinstance(projection, PackedLinear):
        return PackedLinear(linear, projection.dtype, out_dtype=projection.out_dtype)
    if isinstance(projection, Int8Linear):
        return Int8Linear(linear)
    return linear
