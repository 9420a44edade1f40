"""``best_extensions`` against ``plain_extensions``, ``row_argmax`` against ``torch.argmax``."""

import pytest
import torch

from aiayn.accel.topk import best_extensions, plain_extensions, row_argmax


@pytest.mark.parametrize("width", [640, 1000, 1013])
@pytest.mark.parametrize("beams", [1, 4])
def test_best_extensions_equal_plain_extensions(width, beams):
    """Dead beams, -inf columns, a beam whose only finite token is in the tail block, a
    sentence with fewer finite candidates than asked: the same values, and each names a
    beam and token that score it."""
    g = torch.Generator().manual_seed(width + beams)
    sentences = 5
    log_probs = torch.randn(sentences * beams, width, generator=g)
    alive = torch.randn(sentences, beams, generator=g)
    log_probs[3, : width // 2] = float("-inf")
    log_probs[beams] = float("-inf")
    log_probs[beams, width - 1] = 0.0  # the only finite value, in the tail block
    alive[2, -1] = float("-inf")  # a dead beam
    log_probs[4 * beams :] = float("-inf")
    log_probs[4 * beams :, 7] = -1.0  # one finite candidate per beam of the last sentence
    values, beam, token = best_extensions(log_probs, alive, 10, block=64)
    expected, expected_beam, expected_token = plain_extensions(log_probs, alive, 10)
    assert torch.equal(values, expected)
    finite = expected.isfinite()
    assert torch.equal(beam[finite], expected_beam[finite])
    assert torch.equal(token[finite], expected_token[finite])
    rows = beam + beams * torch.arange(sentences)[:, None]  # (B, n)
    scored = log_probs[rows, token] + alive.gather(1, beam)
    assert torch.equal(scored[finite], values[finite])


def test_best_extensions_of_a_short_vocabulary_are_plain():
    log_probs, alive = torch.randn(6, 100), torch.randn(2, 3)
    for got, expected in zip(
        best_extensions(log_probs, alive, 4, block=64),
        plain_extensions(log_probs, alive, 4),
        strict=True,
    ):
        assert torch.equal(got, expected)


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
