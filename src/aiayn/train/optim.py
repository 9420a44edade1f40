"""The optimiser of §5.3: Adam (or AdamW, with weight decay on matrices only).

With ``fused`` (the fast profile), PyTorch's fused kernel updates each parameter in one
operator instead of about ten: the same arithmetic (tested against the plain loop), and on
the CPU the step of configs/shakespeare_char.toml took 0.86 instead of 2.3 ms of a ~30 ms
update (torch profiler, 50 updates, 2 threads).
"""

from __future__ import annotations

import torch
from torch import nn

from aiayn.config import TrainConfig

FUSED_DEVICES = ("cpu", "cuda")  # where PyTorch ≥ 2.4 has fused Adam(W) kernels


def make_optimizer(
    cfg: TrainConfig, model: nn.Module, *, fused: bool = False
) -> torch.optim.Optimizer:
    """Adam(W) over ``model``'s parameters, fused where ``fused`` and the device allows."""
    optim = cfg.optim
    kind = torch.optim.AdamW if optim.optimizer == "adamw" else torch.optim.Adam
    if optim.optimizer == "adamw":
        decay = [p for p in model.parameters() if p.dim() >= 2]
        no_decay = [p for p in model.parameters() if p.dim() < 2]
        groups = [
            {"params": decay, "weight_decay": optim.weight_decay},
            {"params": no_decay, "weight_decay": 0.0},
        ]
    else:
        groups = [{"params": list(model.parameters()), "weight_decay": optim.weight_decay}]
    devices = {p.device.type for p in model.parameters()}
    use_fused = fused and devices <= set(FUSED_DEVICES)
    return kind(groups, lr=0.0, betas=optim.betas, eps=optim.eps, fused=use_fused)
