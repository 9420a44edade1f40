"""Packed linear maps, and a model's packed decoding copy, against the plain model."""

import pytest
import torch
from torch import nn

from aiayn.accel.packed import PackedLinear, onednn_available, packed_for_decoding
from aiayn.config import model_preset
from aiayn.decode import greedy_search
from aiayn.decode.stepper import TransformerStepper, stepper_for
from aiayn.models import build_model

pytestmark = pytest.mark.skipif(not onednn_available(), reason="PyTorch built without oneDNN")


def _linear(bias: bool) -> nn.Linear:
    torch.manual_seed(0)
    return nn.Linear(16, 40, bias=bias)


@pytest.mark.parametrize("bias", [False, True])
def test_packed_linear_equals_linear_in_float32(bias):
    linear = _linear(bias)
    x = torch.randn(3, 5, 16)
    torch.testing.assert_close(PackedLinear(linear)(x), linear(x), atol=1e-5, rtol=1e-5)


def test_packed_linear_in_bfloat16_equals_linear_under_autocast():
    linear = _linear(bias=True)
    x = torch.randn(7, 16)
    out = PackedLinear(linear, torch.bfloat16)(x)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        expected = linear(x)
    assert out.dtype == torch.bfloat16
    torch.testing.assert_close(out.float(), expected.float(), atol=1e-2, rtol=1e-2)


def test_packed_linear_defers_to_autocast():
    linear = _linear(bias=False)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        assert PackedLinear(linear)(torch.randn(3, 16)).dtype == torch.bfloat16


def _model() -> nn.Module:
    torch.manual_seed(0)
    return build_model(model_preset("tiny", dropout=0.0).with_vocab(60)).eval()


def test_the_copy_shares_every_parameter_and_leaves_the_model_alone():
    model = _model()
    twin = packed_for_decoding(model)
    assert {id(p) for p in twin.parameters()} == {id(p) for p in model.parameters()}
    assert isinstance(model.decoder.layers[0].ffn.w_1, nn.Linear)
    assert isinstance(twin.decoder.layers[0].ffn.w_1, PackedLinear)
    assert not any(isinstance(m, nn.Linear) for m in twin.modules())


@pytest.mark.parametrize(("dtype", "tolerance"), [(torch.float32, 1e-4), (torch.bfloat16, 0.05)])
def test_the_packed_copy_decodes_as_the_model(dtype, tolerance):
    """float32: the model's logits; bfloat16: the model's logits under bfloat16 autocast."""
    model = _model()
    src = torch.randint(4, 60, (3, 7))
    tgt = torch.randint(4, 60, (3, 5))
    with torch.autocast("cpu", dtype=torch.bfloat16, enabled=dtype == torch.bfloat16):
        expected = model(src, tgt).float()
    out = packed_for_decoding(model, dtype)(src, tgt).float()
    torch.testing.assert_close(out, expected, atol=tolerance, rtol=tolerance)


def test_greedy_search_through_the_packed_copy_gives_the_same_tokens():
    model = _model()
    src = torch.randint(4, 60, (4, 9))
    plain = greedy_search(TransformerStepper(model), src, max_len=12)
    packed = greedy_search(TransformerStepper(packed_for_decoding(model)), src, max_len=12)
    assert torch.equal(plain, packed)


def test_the_fast_stepper_can_decode_through_the_model_s_own_weights():
    """``packed=False`` (a trainer's validation): no copy, the same tokens as the packed one."""
    model = _model()
    src = torch.randint(4, 60, (4, 9))
    own = stepper_for(model, packed=False)
    assert own.model is model
    assert stepper_for(model).model is not model
    packed = greedy_search(stepper_for(model), src, max_len=12)
    assert torch.equal(greedy_search(own, src, max_len=12), packed)
