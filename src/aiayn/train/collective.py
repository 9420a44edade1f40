"""What a training step runs under and shares across ranks: its autocast (the run's
precision), DDP's gradient sync deferred to the last batch of an update, and sums or maxima
over every rank (nothing to do in a single process)."""

from __future__ import annotations

import contextlib

import torch
import torch.distributed as dist
from torch import nn

from aiayn.runtime import Distributed


def autocast(precision: str, device: torch.device) -> contextlib.AbstractContextManager:
    """The run's mixed precision: none in fp32, else autocast to bfloat16 or float16."""
    if precision == "fp32":
        return contextlib.nullcontext()
    dtype = torch.bfloat16 if precision == "bf16" else torch.float16
    return torch.autocast(device.type, dtype=dtype)


def no_sync_unless_last(
    model: nn.Module, distributed: Distributed, last: bool
) -> contextlib.AbstractContextManager:
    """DDP's ``no_sync`` for every batch of an update but its last (gradient accumulation)."""
    if distributed.enabled and not last:
        return model.no_sync()
    return contextlib.nullcontext()


def all_reduce(
    tensor: torch.Tensor,
    distributed: Distributed,
    device: torch.device,
    op: dist.ReduceOp.RedOpType = dist.ReduceOp.SUM,
) -> torch.Tensor:
    """``tensor`` reduced over every rank (itself in a single process)."""
    if distributed.enabled:
        tensor = tensor.to(device)
        dist.all_reduce(tensor, op=op)
    return tensor
