"""``row_topk`` against ``torch.topk``, ``row_argmax`` against ``torch.argmax``."""

import pytest
import torch

from aiayn.accel.topk import row_argmax, row_topk


@pytest.mark.parametrize("width", [640, 1000, 1013])
def test_row_topk_equals_topk(width):
    g = torch.Generator().manual_seed(width)
    x = torch.randn(7, width, generator=g)
    x[3, : width // 2] = float("-inf")
    x[4] = float("-inf")
    x[4, width - 1] = 0.0  # the only finite value, in the tail block
    values, columns = row_topk(x, 10, block=64)
    expected_values, expected_columns = x.topk(10, dim=1)
    assert torch.equal(values, expected_values)
    finite = expected_values.isfinite()
    assert torch.equal(columns[finite], expected_columns[finite])
    assert torch.equal(x.gather(1, columns), values)


@pytest.mark.parametrize("width", [100, 256, 1000, 1013])
def test_row_argmax_equals_argmax_ties_and_tails_included(width):
    g = torch.Generator().manual_seed(width)
    x = torch.randn(9, width, generator=g)
    x[1, [5, width - 7, width - 1]] = 50.0  # ties: the first column wins
    x[2] = float("-inf")
    x[2, width - 1] = 0.0  # the only finite value, past the full blocks
    x[3] = 1.0  # every column tied
    x[4, width // 2 + 1] = float("nan")  # argmax takes a NaN as the maximum
    x[5, -3:] = 99.0
    x[6, :] = float("-inf")
    assert torch.equal(row_argmax(x, block=64), x.argmax(dim=1))
