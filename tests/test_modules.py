"""The paper's building blocks (``aiayn.modules``): attention, cache, positions, FFN."""

import math

import pytest
import torch
import torch.nn.functional as F

from aiayn import masks
from aiayn.modules import (
    POSITIONAL,
    ConcatKeyValues,
    KVCache,
    LearnedPositionalEmbedding,
    MemoryKeyValues,
    PositionwiseFeedForward,
    SelfAttention,
    SinusoidalPositionalEncoding,
    scaled_dot_product_attention,
    sinusoid_table,
)


def qkv(b=2, h=3, t=5, s=7, dh=8, seed=0):
    g = torch.Generator().manual_seed(seed)
    return (
        torch.randn(b, h, t, dh, generator=g),
        torch.randn(b, h, s, dh, generator=g),
        torch.randn(b, h, s, dh, generator=g),
    )


class SpySDPA:
    """Counts calls of PyTorch's fused attention, to prove which path a computation took."""

    def __init__(self, monkeypatch):
        self.calls = 0
        real = F.scaled_dot_product_attention

        def counting(*args, **kwargs):
            self.calls += 1
            return real(*args, **kwargs)

        monkeypatch.setattr(F, "scaled_dot_product_attention", counting)


@pytest.mark.parametrize("queries", [1, 5, 12, 40])
def test_pytorch_sdpa_with_a_bool_padding_mask_equals_the_eager_path(monkeypatch, queries):
    spy = SpySDPA(monkeypatch)
    q, k, v = qkv(t=queries)
    keys = torch.tensor([[1, 1, 1, 1, 1, 0, 0], [1, 1, 1, 1, 1, 1, 1]])
    mask = masks.padding_mask(keys, pad_id=0)
    fused, none = scaled_dot_product_attention(q, k, v, mask=mask)
    assert spy.calls == 1 and none is None  # PyTorch's kernel computed it
    eager, weights = scaled_dot_product_attention(q, k, v, mask=mask, need_weights=True)
    assert spy.calls == 1  # the eager path did not call it
    torch.testing.assert_close(fused, eager)
    torch.testing.assert_close(weights.sum(-1), torch.ones(2, 3, queries))
    assert torch.all(weights[0, :, :, 5:] == 0)


def test_pytorch_sdpa_with_a_causal_mask_equals_the_eager_path(monkeypatch):
    spy = SpySDPA(monkeypatch)
    q, k, v = qkv(t=12, s=12)
    mask = masks.causal_mask(12)
    fused, _ = scaled_dot_product_attention(q, k, v, mask=mask)
    eager, weights = scaled_dot_product_attention(q, k, v, mask=mask, need_weights=True)
    assert spy.calls == 1
    torch.testing.assert_close(fused, eager)
    assert torch.all(weights.triu(diagonal=1) == 0)


def test_eager_attention_matches_equation_1():
    q, k, v = qkv()
    out, weights = scaled_dot_product_attention(q, k, v, need_weights=True)
    expected = torch.softmax(q @ k.transpose(-2, -1) / math.sqrt(q.size(-1)), dim=-1)
    torch.testing.assert_close(weights, expected)
    torch.testing.assert_close(out, expected @ v)


def test_self_attention_with_past_equals_full_attention():
    torch.manual_seed(0)
    attn = SelfAttention(d_model=16, n_heads=4).eval()
    x = torch.randn(2, 5, 16)
    full, _, none = attn(x, mask=masks.causal_mask(5))
    assert none is None  # no cache asked for, none returned
    head, _, past = attn(x[:, :3], mask=masks.causal_mask(3), past=ConcatKeyValues())
    tail, _, kv = attn(x[:, 3:], mask=masks.causal_mask(2, offset=3), past=past)
    torch.testing.assert_close(torch.cat([head, tail], dim=1), full)
    _, _, everything = attn(x, mask=masks.causal_mask(5), past=ConcatKeyValues())
    torch.testing.assert_close(kv.keys, everything.keys)
    torch.testing.assert_close(kv.values, everything.values)


def positions(b: int, t: int, start: int = 0) -> torch.Tensor:
    """(B, 1, T, 1) keys whose value is their batch row * 100 + position."""
    rows = torch.arange(b)[:, None, None, None] * 100
    return (rows + torch.arange(start, start + t)[None, None, :, None]).float()


def test_concat_key_values_extend_and_select_rows():
    kv = ConcatKeyValues().extended(positions(3, 2), positions(3, 2))
    kv = kv.extended(positions(3, 1, 2), positions(3, 1, 2))
    torch.testing.assert_close(kv.keys, positions(3, 3))
    picked = kv.select(torch.tensor([2, 0]))
    torch.testing.assert_close(picked.values, positions(3, 3)[[2, 0]])
    assert (
        ConcatKeyValues().keys is None and ConcatKeyValues().select(torch.tensor([0])).keys is None
    )


def test_kv_cache_reorder_selects_rows_of_every_layer_and_of_the_memory():
    layers = tuple(
        ConcatKeyValues().extended(positions(3, 3) + i, positions(3, 3) - i) for i in range(2)
    )
    memory = (MemoryKeyValues(positions(3, 4), -positions(3, 4)),)
    cache = KVCache(self_attn=layers, memory=memory, length=3)
    for index in ([2, 1, 2], [1, 0, 2], [0, 1, 2, 2]):
        expected = [(kv.keys[index].clone(), kv.values[index].clone()) for kv in cache.self_attn]
        expected_memory = cache.memory[0].keys[index].clone()
        cache = cache.reorder(torch.tensor(index))
        for kv, (keys, values) in zip(cache.self_attn, expected, strict=True):
            torch.testing.assert_close(kv.keys, keys)
            torch.testing.assert_close(kv.values, values)
        torch.testing.assert_close(cache.memory[0].keys, expected_memory)
    assert cache.length == 3


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
    concat = POSITIONAL["sinusoidal_concat"](d_model=8)
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
    act = {"relu": torch.relu, "gelu": F.gelu, "swish": F.silu}[activation]
    expected = act(x @ ffn.w_1.weight.T + ffn.w_1.bias) @ ffn.w_2.weight.T + ffn.w_2.bias
    torch.testing.assert_close(ffn(x), expected)


def test_unknown_activation_is_rejected():
    with pytest.raises(ValueError, match="unknown activation"):
        PositionwiseFeedForward(d_model=8, d_ff=16, activation="tanh")
