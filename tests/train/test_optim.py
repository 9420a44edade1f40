"""The fused optimiser (fast profile) against the plain per-parameter loop."""

from __future__ import annotations

import copy

import pytest
import torch

from aiayn.config import OptimConfig, RunConfig, TrainConfig
from aiayn.train.optim import make_optimizer

from ..conftest import tiny_model


def _config(optimizer: str) -> TrainConfig:
    optim = OptimConfig(optimizer=optimizer, weight_decay=0.1, betas=(0.9, 0.98), eps=1e-9)
    return TrainConfig(optim=optim, run=RunConfig())


@pytest.mark.parametrize("optimizer", ["adam", "adamw"])
def test_fused_steps_equal_the_plain_loop(optimizer):
    cfg = _config(optimizer)
    plain_model = tiny_model(seed=1).train()
    fused_model = copy.deepcopy(plain_model)
    plain = make_optimizer(cfg, plain_model, fused=False)
    fused = make_optimizer(cfg, fused_model, fused=True)
    assert fused.defaults["fused"] and not plain.defaults["fused"]
    pairs = list(zip(plain_model.parameters(), fused_model.parameters(), strict=True))
    start = [p.detach().clone() for p, _ in pairs]
    g = torch.Generator().manual_seed(0)
    for step in range(1, 6):
        for p_plain, p_fused in pairs:
            grad = torch.randn(p_plain.shape, generator=g)
            p_plain.grad, p_fused.grad = grad.clone(), grad.clone()
        for optim in (plain, fused):
            for group in optim.param_groups:
                group["lr"] = 1e-3 * step
            optim.step()
    for p_plain, p_fused in pairs:
        torch.testing.assert_close(p_fused, p_plain, rtol=1e-5, atol=1e-6)
    assert all(not torch.equal(p, before) for (p, _), before in zip(pairs, start, strict=True))


def test_fused_only_on_devices_with_the_kernel():
    cfg = _config("adamw")
    model = tiny_model().to("meta")
    assert not make_optimizer(cfg, model, fused=True).defaults["fused"]


@pytest.mark.parametrize("name, fused", [("reference", False), ("fast", True)])
def test_the_profile_chooses_the_optimizer(name, fused):
    assert tiny_model(profile=name).profile.fused_optimizer is fused
