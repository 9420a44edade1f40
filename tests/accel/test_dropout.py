"""``UniformDropout`` against ``nn.Dropout``: the same distribution from other draws."""

import pytest
import torch

from aiayn.accel.dropout import UniformDropout


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
