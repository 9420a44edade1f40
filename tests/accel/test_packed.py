"""Packed linear maps, and a model's packed decoding copy, against the plain model."""

import pytest
import torch
from torch import nn

from aiayn.accel import packed as packed_module
from aiayn.accel.packed import (
    MIN_PACKED_WEIGHT,
    PackedFromRows,
    PackedLinear,
    onednn_available,
    packed_for_decoding,
    packs_bfloat16,
    padded_rows,
)
from aiayn.accel.profiles import stepper_for
from aiayn.accel.stepper import fast_stepper
from aiayn.accel.token_step import affine
from aiayn.config import model_preset
from aiayn.decode import greedy_search
from aiayn.models import build_model
from aiayn.modules.stepper import TransformerStepper

pytestmark = [
    pytest.mark.skipif(not onednn_available(), reason="PyTorch built without oneDNN"),
    pytest.mark.isa,
]
needs_bfloat16_packing = pytest.mark.skipif(
    not packs_bfloat16(),
    reason="oneDNN packs bfloat16 only with AVX512-BW/VL/DQ or AVX-NE-CONVERT, not on this CPU",
)


def _linear(bias: bool) -> nn.Linear:
    torch.manual_seed(0)
    return nn.Linear(16, 40, bias=bias)


@pytest.mark.parametrize("bias", [False, True])
def test_packed_linear_equals_linear_in_float32(bias):
    linear = _linear(bias)
    x = torch.randn(3, 5, 16)
    torch.testing.assert_close(PackedLinear(linear)(x), linear(x), atol=1e-5, rtol=1e-5)


@needs_bfloat16_packing
def test_packed_linear_in_bfloat16_equals_linear_under_autocast_in_the_input_s_dtype():
    linear = _linear(bias=True)
    x = torch.randn(7, 16)
    out = PackedLinear(linear, torch.bfloat16)(x)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        expected = linear(x)
    assert out.dtype == torch.float32
    torch.testing.assert_close(out, expected.float(), atol=1e-2, rtol=1e-2)


def test_packed_linear_defers_to_autocast():
    linear = _linear(bias=False)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        assert PackedLinear(linear)(torch.randn(3, 16)).dtype == torch.bfloat16


@pytest.mark.parametrize(
    "dtype", [torch.float32, pytest.param(torch.bfloat16, marks=needs_bfloat16_packing)]
)
def test_the_padding_rows_change_no_row(dtype):
    """Every row count up to 300 (each padded differently) gives the rows of ``F.linear``."""
    linear = _linear(bias=True)
    packed = PackedLinear(linear, dtype)
    x = torch.randn(300, 16)
    with torch.autocast("cpu", dtype=torch.bfloat16, enabled=dtype == torch.bfloat16):
        expected = linear(x).float()
    for n in [*range(1, 40), 127, 128, 129, 255, 256, 257, 300]:
        out = packed(x[:n])
        assert out.shape == (n, 40)
        torch.testing.assert_close(out, expected[:n], atol=1e-2, rtol=1e-2)


def test_padded_rows_adds_at_most_an_eighth_and_meets_eight_counts_per_doubling():
    counts = [padded_rows(n) for n in range(1, 4097)]
    assert all(n <= m <= n + max(7, n // 8) for n, m in enumerate(counts, start=1))
    assert counts[:8] == list(range(1, 9))  # a sentence's beams: as they are
    assert padded_rows(0) == 0 and padded_rows(9) == 16 and padded_rows(257) == 288
    for low in [128, 256, 512, 1024, 2048]:
        assert len(set(counts[low : 2 * low])) == 8  # rows low+1 .. 2·low


def _model(vocab: int = 60) -> nn.Module:
    torch.manual_seed(0)
    return build_model(model_preset("tiny", dropout=0.0).with_vocab(vocab)).eval()


def test_the_copy_shares_every_parameter_and_leaves_the_model_alone():
    model = _model()
    twin = packed_for_decoding(model, min_weight=0)
    assert {id(p) for p in twin.parameters()} == {id(p) for p in model.parameters()}
    assert isinstance(model.decoder.layers[0].ffn.w_1, nn.Linear)
    assert isinstance(twin.decoder.layers[0].ffn.w_1, PackedLinear)
    assert not any(isinstance(m, nn.Linear) for m in twin.modules())


def test_only_weights_of_min_weight_elements_are_packed():
    """A tiny model's maps (at most 384 × 128) stay ``nn.Linear``; a 10,000-word output
    projection is packed."""
    model = _model(vocab=10_000)
    twin = packed_for_decoding(model)
    packed = [m for m in twin.modules() if isinstance(m, PackedLinear)]
    assert [p.weight.shape for p in packed] == [(10_000, 128)]
    assert all(m.weight.numel() < MIN_PACKED_WEIGHT for m in twin.modules() if type(m) is nn.Linear)


def test_every_map_within_many_rows_is_packed_whatever_its_size():
    """The encoder and the memory projections multiply whole sentences: packed at any size;
    the decoder's other small maps stay ``nn.Linear``."""
    model = _model(vocab=10_000)
    twin = packed_for_decoding(model, many_rows=("encoder", "decoder.layers.1.cross_attn.kv_proj"))
    packed = {name for name, m in twin.named_modules() if isinstance(m, PackedLinear)}
    encoder = {name for name, m in model.encoder.named_modules() if isinstance(m, nn.Linear)}
    assert packed == {
        *(f"encoder.{name}" for name in encoder),
        "decoder.layers.1.cross_attn.kv_proj",
        "output.proj",
    }
    src, tgt = torch.randint(4, 10_000, (2, 6)), torch.randint(4, 10_000, (2, 5))
    with torch.inference_mode():
        torch.testing.assert_close(twin(src, tgt), model(src, tgt), atol=1e-4, rtol=1e-4)


def test_the_fast_stepper_packs_the_encoder_and_the_memory_projections():
    stepper = fast_stepper(_model(vocab=10_000))
    model = stepper.model
    assert all(not isinstance(m, nn.Linear) for m in [*model.encoder.modules(), model.output.proj])
    for layer in model.decoder.layers:
        assert isinstance(layer.cross_attn.kv_proj, PackedLinear)
        assert isinstance(layer.self_attn.qkv_proj, PackedFromRows)  # one position per row


def test_small_maps_are_packed_from_rows_only_with_min_product():
    model = _model(vocab=10_000)
    plain = packed_for_decoding(model)
    assert not any(isinstance(m, PackedFromRows) for m in plain.modules())
    split = packed_for_decoding(model, min_product=1 << 20)
    w_1 = split.decoder.layers[0].ffn.w_1  # 256 × 128
    assert isinstance(w_1, PackedFromRows) and w_1.min_rows == 32
    assert isinstance(split.output.proj, PackedLinear)
    wholly = packed_for_decoding(model, min_weight=0, min_product=1 << 20)
    assert not any(isinstance(m, PackedFromRows) for m in wholly.modules())


@pytest.mark.parametrize(
    ("dtype", "tolerance"),
    [(torch.float32, 1e-5), pytest.param(torch.bfloat16, 2e-2, marks=needs_bfloat16_packing)],
)
def test_packed_from_rows_multiplies_few_rows_plainly_and_many_packed(dtype, tolerance):
    """Below ``min_rows`` the very ``nn.Linear`` result; from there the packed one, in
    ``dtype`` with a float32 output; the token step's ``affine`` dispatches alike."""
    linear = _linear(bias=True)
    split = PackedFromRows(linear, dtype, min_product=40 * 16 * 8)  # from 8 rows
    assert split.min_rows == 8
    few, many = torch.randn(7, 16), torch.randn(2, 4, 16)
    step_map = affine(split)
    with torch.inference_mode():
        assert torch.equal(split(few), linear(few))
        assert torch.equal(step_map(few), split(few))
        out = split(many)
        assert out.dtype == torch.float32
        assert torch.equal(out, split.packed(many))
        assert torch.equal(step_map(many.view(8, 16)), out.view(8, 40))
        torch.testing.assert_close(out, linear(many), atol=tolerance, rtol=tolerance)


@needs_bfloat16_packing
def test_bfloat16_outputs_only_when_every_map_is_packed():
    """Partly packed, packed maps return float32, so that bfloat16 and float32 never meet in
    one product; wholly packed, the copy runs as under autocast."""
    model = _model(vocab=10_000)
    src, tgt = torch.randint(4, 10_000, (2, 6)), torch.randint(4, 10_000, (2, 5))
    partly = packed_for_decoding(model, torch.bfloat16)
    wholly = packed_for_decoding(model, torch.bfloat16, min_weight=0)
    with torch.inference_mode():
        assert partly(src, tgt).dtype == torch.float32
        assert wholly(src, tgt).dtype == torch.bfloat16


@pytest.mark.parametrize(
    ("dtype", "tolerance"),
    [(torch.float32, 1e-4), pytest.param(torch.bfloat16, 0.05, marks=needs_bfloat16_packing)],
)
def test_the_packed_copy_decodes_as_the_model(dtype, tolerance):
    """float32: the model's logits; bfloat16: the model's logits under bfloat16 autocast."""
    model = _model()
    src = torch.randint(4, 60, (3, 7))
    tgt = torch.randint(4, 60, (3, 5))
    with torch.autocast("cpu", dtype=torch.bfloat16, enabled=dtype == torch.bfloat16):
        expected = model(src, tgt).float()
    out = packed_for_decoding(model, dtype, min_weight=0)(src, tgt).float()
    torch.testing.assert_close(out, expected, atol=tolerance, rtol=tolerance)


def test_greedy_search_through_the_packed_copy_gives_the_same_tokens():
    model = _model()
    src = torch.randint(4, 60, (4, 9))
    plain = greedy_search(TransformerStepper(model), src, max_len=12)
    packed_model = packed_for_decoding(model, min_weight=0)
    packed = greedy_search(TransformerStepper(packed_model), src, max_len=12)
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


@pytest.mark.parametrize("packs", [pytest.param(True, marks=needs_bfloat16_packing), False])
def test_bf16_stepping_packs_where_onednn_can_and_autocasts_elsewhere(monkeypatch, packs):
    """A bf16 stepper over a packable output projection: packed where this CPU lets oneDNN
    pack bfloat16, else the model under autocast (an AVX2 CPU refused the packing outright);
    either way the plain stepper's bf16 log-probabilities."""
    monkeypatch.setattr(packed_module, "packs_bfloat16", lambda: packs)
    model = _model(vocab=10_000)
    src = torch.randint(4, 10_000, (3, 7))
    tokens = torch.full((3, 1), model.specials.bos)
    fast = stepper_for(model, precision="bf16")
    assert any(isinstance(m, PackedLinear) for m in fast.model.modules()) == packs
    plain = TransformerStepper(model, precision="bf16")
    with torch.inference_mode():
        expected, _ = plain.step(tokens, plain.start(src))
        got, _ = fast.step(tokens, fast.start(src))
    torch.testing.assert_close(got, expected, atol=0.05, rtol=0.05)
