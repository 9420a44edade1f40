"""``fused_label_smoothed_nll`` against ``F.cross_entropy`` and the reference loss."""

import math

import pytest
import torch
import torch.nn.functional as F

from aiayn.accel.fused_loss import (
    CHUNK_ROWS_MULTIPLE,
    chunks,
    fused_label_smoothed_nll,
    fused_loss,
)
from aiayn.modules import OutputProjection
from aiayn.modules.loss import label_smoothed_nll

pytestmark = pytest.mark.isa  # also run held to AVX2: tests/test_held_isa.py


def test_label_smoothing_against_a_hand_computed_value():
    hidden = torch.tensor([[1.0, 0.0, 0.0, 0.0]])
    weight = torch.diag(torch.tensor([2.0, 0.0, 0.0, 0.0]))  # logits [2, 0, 0, 0]
    z = math.exp(2) + 3
    log_p = [2 - math.log(z)] + [-math.log(z)] * 3
    expected = 0.9 * -log_p[0] + 0.1 * -sum(log_p) / 4
    loss, nll = fused_label_smoothed_nll(hidden, weight, torch.tensor([0]), epsilon=0.1)
    assert loss.item() == pytest.approx(expected, rel=1e-6)
    assert nll.item() == pytest.approx(-log_p[0], rel=1e-6)


def assert_fused_equals_cross_entropy(
    rows: int,
    *,
    chunk_rows: int | None = None,
    device: str = "cpu",
    weight_grad_atol: float | None = None,
) -> None:
    """Loss, NLL and both gradients of the fused loss against ``F.cross_entropy``; the
    weight's gradient sums ``rows`` terms (``weight_grad_atol`` for long sums in another
    order)."""
    g = torch.Generator(device=device).manual_seed(0)
    hidden = torch.randn(rows, 16, generator=g, device=device, requires_grad=True)
    weight = torch.randn(30, 16, generator=g, device=device, requires_grad=True)
    target = torch.randint(0, 30, (rows,), generator=g, device=device)
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
    tolerance = {} if weight_grad_atol is None else {"rtol": 1e-4, "atol": weight_grad_atol}
    torch.testing.assert_close(fused_grads[1], weight.grad, **tolerance)


@pytest.mark.parametrize("chunk_rows", [1, 7, 64, 1000])
def test_fused_loss_and_gradients_equal_torch_cross_entropy(chunk_rows):
    assert_fused_equals_cross_entropy(50, chunk_rows=chunk_rows)


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


def test_fused_loss_equals_the_reference_loss_through_a_projection():
    torch.manual_seed(2)
    output = OutputProjection(d_model=16, vocab_size=30)
    hidden = torch.randn(40, 16, requires_grad=True)
    target = torch.randint(0, 30, (40,))
    loss, nll = label_smoothed_nll(hidden, output, target, epsilon=0.1)
    loss.backward()
    ref_grads = hidden.grad.clone(), output.weight.grad.clone()
    hidden.grad = output.weight.grad = None
    fused, fused_nll = fused_loss(hidden, output, target, epsilon=0.1)
    fused.backward()
    torch.testing.assert_close(fused, loss)
    torch.testing.assert_close(fused_nll, nll)
    torch.testing.assert_close(hidden.grad, ref_grads[0])
    torch.testing.assert_close(output.weight.grad, ref_grads[1])


@pytest.mark.parametrize(
    "n, chunk_rows", [(1, 256), (3830, 256), (4097, 256), (50, 7), (8192, 8192)]
)
def test_chunks_tile_the_rows_and_pad_products_to_few_row_counts(n, chunk_rows):
    bounds = chunks(n, chunk_rows)
    assert [r.start for r, _ in bounds] == list(range(0, n, chunk_rows))
    assert bounds[-1][0].stop == n
    for rows, padded in bounds:
        count = rows.stop - rows.start
        assert padded % CHUNK_ROWS_MULTIPLE == 0
        assert count <= padded < count + CHUNK_ROWS_MULTIPLE
