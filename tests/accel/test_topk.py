"""``row_topk`` against ``torch.topk``."""

import pytest
import torch

from aiayn.accel.topk import row_topk


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
