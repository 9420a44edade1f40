"""``UniformDropout`` against ``nn.Dropout``: the same distribution from other draws."""

import pytest
import torch

from aiayn.accel.dropout import UniformDropout, keep_mask


@pytest.mark.parametrize("p", [0.1, 0.3, 0.5])
def test_zeroes_a_fraction_p_and_scales_the_rest(p):
    torch.manual_seed(0)
    x = torch.rand(1_000_000) + 0.5
    out = UniformDropout(p).train()(x)
    kept = out != 0
    assert kept.float().mean().item() == pytest.approx(1 - p, abs=3e-3)
    torch.testing.assert_close(out[kept], x[kept] / (1 - p))
    reference = torch.nn.Dropout(p).train()(x)
    assert out.mean().item() == pytest.approx(reference.mean().item(), rel=5e-3)


def test_identity_in_eval_and_at_zero():
    x = torch.randn(100)
    assert torch.equal(UniformDropout(0.3).eval()(x), x)
    assert torch.equal(UniformDropout(0.0).train()(x), x)
    with pytest.raises(ValueError, match="probability"):
        UniformDropout(1.0)


def test_gradients_flow_through_the_kept_elements():
    torch.manual_seed(1)
    x = torch.randn(1000, requires_grad=True)
    out = UniformDropout(0.5).train()(x)
    out.sum().backward()
    torch.testing.assert_close(x.grad, (out != 0).float() * 2.0)


def test_the_same_seed_draws_the_same_mask_and_neighbours_are_independent():
    """Four elements share one 64-bit draw: adjacent elements must still be kept
    independently (the pairs' frequencies are those of independent draws)."""
    torch.manual_seed(3)
    first = keep_mask(torch.Size([1_000, 1_000]), 0.3)
    torch.manual_seed(3)
    assert torch.equal(keep_mask(torch.Size([1_000, 1_000]), 0.3), first)
    assert not torch.equal(keep_mask(torch.Size([1_000, 1_000]), 0.3), first)
    flat = first.flatten()
    for offset in (1, 2, 3, 4):
        both = (flat[:-offset] & flat[offset:]).float().mean().item()
        assert both == pytest.approx(0.7**2, abs=3e-3)


@pytest.mark.parametrize("shape", [(1,), (3,), (5, 7), (2, 3, 5)])
def test_masks_of_any_size(shape):
    torch.manual_seed(0)
    assert keep_mask(torch.Size(shape), 0.5).shape == shape
