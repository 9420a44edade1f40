"""``FastLogProbs`` against the reference ``log_softmax(output(hidden))``."""

import pytest
import torch

from aiayn.accel import output as fast_output
from aiayn.accel.output import FastLogProbs, PackedLinear
from aiayn.modules import OutputProjection

needs_onednn = pytest.mark.skipif(
    not fast_output._onednn_available(), reason="PyTorch built without oneDNN"
)


def _projection(bias: bool) -> OutputProjection:
    torch.manual_seed(0)
    out = OutputProjection(d_model=16, vocab_size=50)
    if bias:  # a projection with a bias, as imported Marian models have
        out.proj.bias = torch.nn.Parameter(torch.randn(50))
    return out


@needs_onednn
@pytest.mark.parametrize("bias", [False, True])
def test_packed_projection_and_in_place_log_softmax_equal_the_reference(bias):
    output = _projection(bias)
    fast = FastLogProbs(output)
    assert isinstance(fast.project, PackedLinear)  # the packed path is the one tested
    hidden = torch.randn(6, 16)
    expected = output(hidden).log_softmax(dim=-1)
    assert fast_output._log_softmax_can_overwrite(50)
    torch.testing.assert_close(fast(hidden), expected, atol=1e-5, rtol=1e-5)


@needs_onednn
def test_packed_linear_defers_to_autocast():
    output = _projection(bias=False)
    packed = PackedLinear(output.weight)
    x = torch.randn(3, 1, 16)
    torch.testing.assert_close(packed(x), output(x), atol=1e-5, rtol=1e-5)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        assert packed(x).dtype == torch.bfloat16
