"""The optimiser of §5.3: Adam (or AdamW, with weight decay on matrices only)."""

from __future__ import annotations

import torch
from torch import nn

from aiayn.config import TrainConfig


def make_optimizer(cfg: TrainConfig, model: nn.Module) -> torch.optim.Optimizer:
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
    return kind(groups, lr=0.0, betas=optim.betas, eps=optim.eps)
