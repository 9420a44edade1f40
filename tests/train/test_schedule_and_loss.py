import math

import pytest
import torch
import torch.nn.functional as F

from aiayn.config import OptimConfig
from aiayn.train import fused_label_smoothed_nll, learning_rate, noam_lr


@pytest.mark.parametrize("step", [1, 10, 100, 3999, 4000, 4001, 10_000, 100_000])
def test_noam_matches_equation_3(step):
    expected = 512**-0.5 * min(step**-0.5, step * 4000**-1.5)
    assert noam_lr(step, d_model=512, warmup_steps=4000) == pytest.approx(expected, rel=1e-12)


def test_noam_peaks_at_warmup_and_scales():
    peak = noam_lr(4000, d_model=512, warmup_steps=4000)
    assert peak == pytest.approx(512**-0.5 * 4000**-0.5)
    assert noam_lr(3999, d_model=512, warmup_steps=4000) < peak
    assert noam_lr(4001, d_model=512, warmup_steps=4000) < peak
    assert noam_lr(50, d_model=512, warmup_steps=4000, scale=2.0) == pytest.approx(
        2 * noam_lr(50, d_model=512, warmup_steps=4000)
    )


def test_inverse_sqrt_has_an_explicit_peak():
    optim = OptimConfig(schedule="inverse_sqrt", lr=0.005, warmup_steps=2000)

    def lr(step):
        return learning_rate(step, optim, d_model=128, max_updates=8000)

    assert lr(1000) == pytest.approx(0.0025)
    assert lr(2000) == pytest.approx(0.005)
    assert lr(8000) == pytest.approx(0.005 * math.sqrt(2000 / 8000))


def test_cosine_warms_up_then_decays_to_min():
    optim = OptimConfig(schedule="cosine", lr=1e-3, warmup_steps=100, min_lr=1e-4)

    def lr(step):
        return learning_rate(step, optim, d_model=128, max_updates=2000)

    assert lr(50) == pytest.approx(5e-4)
    assert lr(100) == pytest.approx(1e-3)
    assert lr(1050) == pytest.approx(5.5e-4)
    assert lr(2000) == pytest.approx(1e-4)


def test_label_smoothing_against_a_hand_computed_value():
    hidden = torch.tensor([[1.0, 0.0, 0.0, 0.0]])
    weight = torch.diag(torch.tensor([2.0, 0.0, 0.0, 0.0]))  # logits [2, 0, 0, 0]
    z = math.exp(2) + 3
    log_p = [2 - math.log(z)] + [-math.log(z)] * 3
    expected = 0.9 * -log_p[0] + 0.1 * -sum(log_p) / 4
    loss, nll = fused_label_smoothed_nll(hidden, weight, torch.tensor([0]), epsilon=0.1)
    assert loss.item() == pytest.approx(expected, rel=1e-6)
    assert nll.item() == pytest.approx(-log_p[0], rel=1e-6)


@pytest.mark.parametrize("chunk_rows", [1, 7, 64, 1000])
def test_fused_loss_and_gradients_equal_torch_cross_entropy(chunk_rows):
    g = torch.Generator().manual_seed(0)
    hidden = torch.randn(50, 16, generator=g, requires_grad=True)
    weight = torch.randn(30, 16, generator=g, requires_grad=True)
    target = torch.randint(0, 30, (50,), generator=g)
    loss, nll = fused_label_smoothed_nll(hidden, weight, target, epsilon=0.1, chunk_rows=chunk_rows)
    (2.0 * loss).backward()
    fused_grads = hidden.grad.clone(), weight.grad.clone()
    hidden.grad = weight.grad = None
    logits = hidden @ weight.T
    ref = F.cross_entropy(logits, target, label_smoothing=0.1, reduction="sum")
    (2.0 * ref).backward()
    torch.testing.assert_close(loss, ref)
    torch.testing.assert_close(nll, F.cross_entropy(logits, target, reduction="sum"))
    torch.testing.assert_close(fused_grads[0], hidden.grad)
    torch.testing.assert_close(fused_grads[1], weight.grad)


def test_fused_loss_without_gradients_and_under_bf16_autocast():
    g = torch.Generator().manual_seed(1)
    hidden = torch.randn(40, 16, generator=g)
    weight = torch.randn(30, 16, generator=g)
    target = torch.randint(0, 30, (40,), generator=g)
    ref = F.cross_entropy(hidden @ weight.T, target, label_smoothing=0.1, reduction="sum")
    with torch.no_grad():
        loss, _ = fused_label_smoothed_nll(hidden, weight, target, epsilon=0.1)
    torch.testing.assert_close(loss, ref)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        loss_bf16, _ = fused_label_smoothed_nll(hidden, weight, target, epsilon=0.1)
    assert loss_bf16.dtype == torch.float32
    torch.testing.assert_close(loss_bf16, ref, rtol=2e-2, atol=0)
