"""``aiayn.accel.attention`` against the paper's ``scaled_dot_product_attention``."""

import pytest
import torch

from aiayn import masks
from aiayn.accel.attention import (
    MAX_EAGER_KEYS_WITHOUT_GRAD,
    MAX_EAGER_QUERIES,
    additive_mask,
    biased_attention,
    cpu_attention,
    padded_softmax,
)
from aiayn.modules import scaled_dot_product_attention

from ..test_modules import SpySDPA, qkv

pytestmark = pytest.mark.isa  # also run held to AVX2: tests/test_held_isa.py


def _mask(b: int, s: int) -> torch.Tensor:
    keys = torch.ones(b, s, dtype=torch.long)
    keys[0, s // 2 + 1 :] = 0
    return masks.padding_mask(keys, pad_id=0)


@pytest.mark.parametrize("queries", [1, 5, MAX_EAGER_QUERIES])
def test_few_queries_take_the_eager_path_and_equal_the_reference(monkeypatch, queries):
    q, k, v = qkv(t=queries, s=13)
    mask = _mask(2, 13)
    expected, _ = scaled_dot_product_attention(q, k, v, mask=mask)
    spy = SpySDPA(monkeypatch)
    out, _ = cpu_attention(q, k, v, mask=mask)
    assert spy.calls == 0  # computed eagerly
    torch.testing.assert_close(out, expected)


def test_many_float32_queries_take_pytorchs_kernel(monkeypatch):
    q, k, v = qkv(t=MAX_EAGER_QUERIES + 1, s=13)
    spy = SpySDPA(monkeypatch)
    out, _ = cpu_attention(q, k, v, mask=_mask(2, 13))
    assert spy.calls == 1
    expected, _ = scaled_dot_product_attention(q, k, v, mask=_mask(2, 13))
    torch.testing.assert_close(out, expected)


@pytest.mark.parametrize(("keys", "eager"), [(13, True), (MAX_EAGER_KEYS_WITHOUT_GRAD + 1, False)])
def test_float32_without_autograd_is_eager_over_sentence_lengths(monkeypatch, keys, eager):
    q, k, v = qkv(t=keys, s=keys)
    mask = _mask(2, keys)
    spy = SpySDPA(monkeypatch)
    with torch.no_grad():
        out, _ = cpu_attention(q, k, v, mask=mask)
    assert spy.calls == (0 if eager else 1)
    expected, _ = scaled_dot_product_attention(q, k, v, mask=mask)
    torch.testing.assert_close(out, expected)


@pytest.mark.parametrize("queries", [1, 30])
def test_bfloat16_is_eager_and_close_to_the_reference(monkeypatch, queries):
    q, k, v = (x.bfloat16() for x in qkv(t=queries, s=21))
    mask = _mask(2, 21)
    spy = SpySDPA(monkeypatch)
    out, _ = cpu_attention(q, k, v, mask=mask)
    assert spy.calls == 0 and out.dtype == torch.bfloat16
    expected, _ = scaled_dot_product_attention(q.float(), k.float(), v.float(), mask=mask)
    torch.testing.assert_close(out.float(), expected, atol=3e-2, rtol=3e-2)


def test_weights_asked_for_equal_the_reference_weights():
    q, k, v = qkv(t=4, s=9)
    mask = _mask(2, 9)
    out, weights = cpu_attention(q, k, v, mask=mask, need_weights=True)
    ref_out, ref_weights = scaled_dot_product_attention(q, k, v, mask=mask, need_weights=True)
    torch.testing.assert_close(weights, ref_weights)
    torch.testing.assert_close(out, ref_out)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_gradients_equal_the_references_under_a_causal_padding_mask(dtype):
    tokens = torch.ones(2, 7, dtype=torch.long)
    tokens[1, 5:] = 0
    mask = masks.decoder_self_mask(tokens, pad_id=0)  # (B, 1, T, T)
    grads = []
    for attention in (scaled_dot_product_attention, cpu_attention):
        q, k, v = (x.to(dtype).requires_grad_() for x in qkv(t=7, s=7, seed=5))
        out, _ = attention(q, k, v, mask=mask)
        out.float().square().sum().backward()
        grads.append([x.grad.float() for x in (q, k, v)])
    tol = 1e-5 if dtype == torch.float32 else 5e-2
    for ours, reference in zip(*grads, strict=True):
        torch.testing.assert_close(ours, reference, atol=tol, rtol=tol)


@pytest.mark.parametrize("queries", [1, 5])
def test_biased_attention_on_flat_rows_equals_the_reference(queries):
    q, k, v = qkv(t=queries, s=13)  # (B, H, T, Dh), (B, H, S, Dh) each
    mask = _mask(2, 13)  # (B, 1, 1, S)
    b, h, t, dh = q.shape
    bias = additive_mask(mask, q.device).expand(b, h, 1, 13).reshape(b * h, 1, 13)
    keys_t = k.reshape(b * h, 13, dh).transpose(1, 2)  # (B·H, Dh, S)
    out, weights = biased_attention(q.reshape(b * h, t, dh), keys_t, v.reshape(b * h, 13, dh), bias)
    ref_out, ref_weights = scaled_dot_product_attention(q, k, v, mask=mask, need_weights=True)
    torch.testing.assert_close(out.view(b, h, t, dh), ref_out)
    torch.testing.assert_close(weights.view(b, h, t, 13), ref_weights)


@pytest.mark.parametrize("length", [1, 5, 15, 16, 23])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_padded_softmax_is_the_softmax_for_any_row_length(length, dtype):
    g = torch.Generator().manual_seed(length)
    scores = torch.randn(3, 2, 4, length, generator=g)
    scores[0, ..., length // 2 + 1 :] = float("-inf")
    out = padded_softmax(scores.to(dtype))
    assert out.dtype == dtype and out.shape == scores.shape
    tol = 1e-6 if dtype == torch.float32 else 2e-2
    torch.testing.assert_close(out.float(), scores.softmax(dim=-1), atol=tol, rtol=tol)


def test_attention_dropout_keeps_the_expected_output():
    q, k, v = qkv(b=64, h=4, t=3, s=16, seed=3)
    plain, _ = cpu_attention(q, k, v)
    torch.manual_seed(0)
    dropped, _ = cpu_attention(q, k, v, dropout_p=0.5)
    assert not torch.allclose(dropped, plain)
    assert (dropped - plain).mean().abs() < 0.02  # unbiased: 1 / (1 - p) scaling
