import math

import pytest
import torch

from aiayn import masks
from aiayn.modules import (
    LearnedPositionalEmbedding,
    PositionwiseFeedForward,
    SelfAttention,
    SinusoidalPositionalEncoding,
    scaled_dot_product_attention,
    sinusoid_table,
)
from aiayn.modules.cache import KVCache
from aiayn.modules.kv_buffer import SPARE_ROOM_FROM, KeyValueBuffer
from aiayn.modules.packed_linear import PackedLinear, packed_for_inference
from aiayn.modules.positional import SinusoidalConcatPositionalEncoding


def _qkv(b=2, h=3, t=5, s=7, dh=8, seed=0):
    g = torch.Generator().manual_seed(seed)
    return (
        torch.randn(b, h, t, dh, generator=g),
        torch.randn(b, h, s, dh, generator=g),
        torch.randn(b, h, s, dh, generator=g),
    )


def test_fused_and_eager_attention_agree_with_padding_mask():
    q, k, v = _qkv()
    keys = torch.tensor([[1, 1, 1, 1, 1, 0, 0], [1, 1, 1, 1, 1, 1, 1]])
    mask = masks.padding_mask(keys, pad_id=0)
    fused, none = scaled_dot_product_attention(q, k, v, mask=mask)
    eager, weights = scaled_dot_product_attention(q, k, v, mask=mask, need_weights=True)
    assert none is None
    torch.testing.assert_close(fused, eager)
    torch.testing.assert_close(weights.sum(-1), torch.ones(2, 3, 5))
    assert torch.all(weights[0, :, :, 5:] == 0)


def test_fused_and_eager_attention_agree_with_causal_mask():
    q, k, v = _qkv(t=6, s=6)
    mask = masks.causal_mask(6)
    fused, _ = scaled_dot_product_attention(q, k, v, mask=mask)
    eager, weights = scaled_dot_product_attention(q, k, v, mask=mask, need_weights=True)
    torch.testing.assert_close(fused, eager)
    assert torch.all(weights.triu(diagonal=1) == 0)


def test_eager_attention_matches_equation_1():
    q, k, v = _qkv()
    _, weights = scaled_dot_product_attention(q, k, v, need_weights=True)
    expected = torch.softmax(q @ k.transpose(-2, -1) / math.sqrt(q.size(-1)), dim=-1)
    torch.testing.assert_close(weights, expected)


def test_self_attention_with_past_equals_full_attention():
    torch.manual_seed(0)
    attn = SelfAttention(d_model=16, n_heads=4).eval()
    x = torch.randn(2, 5, 16)
    full, _, kv = attn(x, mask=masks.causal_mask(5))
    head, _, past = attn(x[:, :3], mask=masks.causal_mask(3))
    tail, _, kv2 = attn(x[:, 3:], mask=masks.causal_mask(2, offset=3), past=past)
    torch.testing.assert_close(torch.cat([head, tail], dim=1), full)
    torch.testing.assert_close(kv2.keys, kv.keys)
    torch.testing.assert_close(kv2.values, kv.values)


def _positions(b: int, t: int, start: int = 0) -> torch.Tensor:
    """(B, 1, T, 1) keys whose value is their batch row * 100 + position."""
    rows = torch.arange(b)[:, None, None, None] * 100
    return (rows + torch.arange(start, start + t)[None, None, :, None]).float()


def test_key_value_buffer_extends_contiguously_and_keeps_old_values_intact():
    kv = KeyValueBuffer.wrap(_positions(2, 1), _positions(2, 1))
    steps = [kv]
    for t in range(1, 40):
        steps.append(steps[-1].extended(_positions(2, 1, t), _positions(2, 1, t)))
    last = steps[-1]
    assert last.length == 40 and last.keys.is_contiguous()
    torch.testing.assert_close(last.keys, _positions(2, 40))
    torch.testing.assert_close(steps[10].values, _positions(2, 11))  # earlier values unchanged


def test_long_key_value_buffer_leaves_room_and_grows_in_place():
    kv = KeyValueBuffer.wrap(_positions(1, SPARE_ROOM_FROM), _positions(1, SPARE_ROOM_FROM))
    first = kv.extended(_positions(1, 1, SPARE_ROOM_FROM), _positions(1, 1, SPARE_ROOM_FROM))
    second = first.extended(
        _positions(1, 1, SPARE_ROOM_FROM + 1), _positions(1, 1, SPARE_ROOM_FROM + 1)
    )
    assert second.stored_keys.data_ptr() == first.stored_keys.data_ptr()  # no copy
    torch.testing.assert_close(second.keys, _positions(1, SPARE_ROOM_FROM + 2))
    torch.testing.assert_close(first.keys, _positions(1, SPARE_ROOM_FROM + 1))
    branch = first.extended(torch.full((1, 1, 1, 1), -1.0), torch.full((1, 1, 1, 1), -1.0))
    assert branch.keys[0, 0, -1, 0] == -1
    torch.testing.assert_close(second.keys, _positions(1, SPARE_ROOM_FROM + 2))


def test_key_value_buffer_branches_without_overwriting():
    base = KeyValueBuffer.wrap(_positions(1, 3), _positions(1, 3)).extended(
        _positions(1, 1, 3), _positions(1, 1, 3)
    )
    left = base.extended(torch.full((1, 1, 1, 1), -1.0), torch.full((1, 1, 1, 1), -1.0))
    right = base.extended(torch.full((1, 1, 1, 1), -2.0), torch.full((1, 1, 1, 1), -2.0))
    assert left.keys[0, 0, -1, 0] == -1 and right.keys[0, 0, -1, 0] == -2
    torch.testing.assert_close(base.keys, _positions(1, 4))


def test_key_value_buffer_selections_compose_and_are_gathered_when_extended():
    kv = KeyValueBuffer.wrap(_positions(3, 2), _positions(3, 2)).extended(
        _positions(3, 1, 2), _positions(3, 1, 2)
    )
    picked = kv.select(torch.tensor([2, 2, 0])).select(torch.tensor([2, 0]))  # rows 0, 2
    assert picked.stored_keys is kv.stored_keys  # recorded, not copied
    torch.testing.assert_close(picked.keys, _positions(3, 3)[[0, 2]])
    grown = picked.extended(_positions(2, 1, 3), _positions(2, 1, 3))
    torch.testing.assert_close(grown.values[:, :, :3], _positions(3, 3)[[0, 2]])
    torch.testing.assert_close(grown.values[:, :, 3], _positions(2, 1, 3)[:, :, 0])
    assert grown.rows is None and grown.keys.is_contiguous()


@pytest.mark.parametrize("pos", [0, 1, 7, 50])
@pytest.mark.parametrize("i", [0, 1, 5, 31])
def test_sinusoid_table_matches_the_paper_formula(pos, i):
    d = 64
    table = sinusoid_table(64, d)
    angle = pos / 10000 ** (2 * i / d)
    assert table[pos, 2 * i].item() == pytest.approx(math.sin(angle), abs=1e-6)
    assert table[pos, 2 * i + 1].item() == pytest.approx(math.cos(angle), abs=1e-6)


def test_concat_layout_is_a_permutation_of_the_paper_layout():
    paper = sinusoid_table(20, 16)
    concat = sinusoid_table(20, 16, interleaved=False)
    torch.testing.assert_close(concat[:, :8], paper[:, 0::2])
    torch.testing.assert_close(concat[:, 8:], paper[:, 1::2])


def test_sinusoidal_encoding_grows_beyond_its_initial_table():
    enc = SinusoidalPositionalEncoding(d_model=8, initial_length=4)
    torch.testing.assert_close(enc(3, offset=10), sinusoid_table(13, 8)[10:])
    concat = SinusoidalConcatPositionalEncoding(d_model=8)
    torch.testing.assert_close(concat(5), sinusoid_table(5, 8, interleaved=False))


def test_learned_positions_refuse_positions_past_the_table():
    pos = LearnedPositionalEmbedding(d_model=8, max_positions=4)
    assert pos(2, offset=2).shape == (2, 8)
    with pytest.raises(ValueError, match="max_positions"):
        pos(3, offset=2)


@pytest.mark.parametrize("activation", ["relu", "gelu", "swish"])
def test_feed_forward_applies_the_chosen_activation(activation):
    torch.manual_seed(0)
    ffn = PositionwiseFeedForward(d_model=8, d_ff=16, activation=activation)
    x = torch.randn(2, 3, 8)
    act = {"relu": torch.relu, "gelu": torch.nn.functional.gelu, "swish": torch.nn.functional.silu}[
        activation
    ]
    expected = act(x @ ffn.w_1.weight.T + ffn.w_1.bias) @ ffn.w_2.weight.T + ffn.w_2.bias
    torch.testing.assert_close(ffn(x), expected)


def test_unknown_activation_is_rejected():
    with pytest.raises(ValueError, match="unknown activation"):
        PositionwiseFeedForward(d_model=8, d_ff=16, activation="tanh")


def test_kv_cache_reorder_selects_rows_of_every_layer():
    layers = tuple(
        KeyValueBuffer.wrap(_positions(3, 2) + i, _positions(3, 2) - i).extended(
            _positions(3, 1, 2) + i, _positions(3, 1, 2) - i
        )
        for i in range(2)
    )
    cache = KVCache(self_attn=layers, cross_attn=(), length=3)
    for index in ([2, 1, 2], [1, 0, 2], [0, 1, 2]):
        expected = [(kv.keys[index].clone(), kv.values[index].clone()) for kv in cache.self_attn]
        cache = cache.reorder(torch.tensor(index))
        for kv, (keys, values) in zip(cache.self_attn, expected, strict=True):
            torch.testing.assert_close(kv.keys, keys)
            torch.testing.assert_close(kv.values, values)


@pytest.mark.parametrize("length", [1, 5, 15, 16, 23])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_eager_attention_softmax_is_the_softmax_for_any_row_length(length, dtype):
    q, k, v = (x.to(dtype) for x in _qkv(t=3, s=length))
    mask = torch.ones(2, 1, 1, length, dtype=torch.bool)
    mask[0, ..., length // 2 + 1 :] = False
    _, weights = scaled_dot_product_attention(q, k, v, mask=mask, need_weights=True)
    scores = (q.float() @ k.float().transpose(-2, -1)) / math.sqrt(q.size(-1))
    expected = scores.masked_fill(~mask, float("-inf")).softmax(dim=-1)
    assert weights.dtype == dtype and weights.shape == expected.shape
    tol = 1e-6 if dtype == torch.float32 else 2e-2
    torch.testing.assert_close(weights.float(), expected, atol=tol, rtol=tol)


def test_packed_linear_equals_the_linear_layer_and_defers_under_autocast():
    torch.manual_seed(0)
    linear = torch.nn.Linear(16, 50, bias=False)
    project = packed_for_inference(linear)
    x = torch.randn(6, 1, 16)
    torch.testing.assert_close(project(x), linear(x), atol=1e-5, rtol=1e-5)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        assert project(x).dtype == torch.bfloat16
    with_bias = torch.nn.Linear(16, 50)
    assert packed_for_inference(with_bias) is with_bias
    if torch.backends.mkldnn.is_available():
        assert isinstance(project, PackedLinear)
