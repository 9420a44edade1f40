import math

import pytest

from aiayn.config import OptimConfig
from aiayn.train import learning_rate, noam_lr


@pytest.mark.parametrize("step", [1, 10, 100, 3999, 4000, 4001, 10_000, 100_000])
def test_noam_matches_equation_3(step):
    expected = 512**-0.5 * min(step**-0.5, step * 4000**-1.5)
    assert noam_lr(step, d_model=512, warmup_steps=4000) == pytest.approx(expected, rel=1e-12)


def test_noam_peaks_at_warmup_and_scales():
    peak = noam_lr(4000, d_model=512, warmup_steps=4000)
    assert peak == pytest.approx(512**-0.5 * 4000**-0.5)
    assert noam_lr(3999, d_model=512, warmup_steps=4000) < peak
    assert noam_lr(4001, d_model=512, warmup_steps=4000) < peak
    assert noam_lr(50, d_model=512, warmup_steps=4000, scale=2.0) == pytest.approx(
        2 * noam_lr(50, d_model=512, warmup_steps=4000)
    )


def test_inverse_sqrt_has_an_explicit_peak():
    optim = OptimConfig(schedule="inverse_sqrt", lr=0.005, warmup_steps=2000)

    def lr(step):
        return learning_rate(step, optim, d_model=128, max_updates=8000)

    assert lr(1000) == pytest.approx(0.0025)
    assert lr(2000) == pytest.approx(0.005)
    assert lr(8000) == pytest.approx(0.005 * math.sqrt(2000 / 8000))


def test_cosine_warms_up_then_decays_to_min():
    optim = OptimConfig(schedule="cosine", lr=1e-3, warmup_steps=100, min_lr=1e-4)

    def lr(step):
        return learning_rate(step, optim, d_model=128, max_updates=2000)

    assert lr(50) == pytest.approx(5e-4)
    assert lr(100) == pytest.approx(1e-3)
    assert lr(1050) == pytest.approx(5.5e-4)
    assert lr(2000) == pytest.approx(1e-4)


@pytest.mark.parametrize("decay", ["linear", "cosine"])
def test_the_budget_schedule_warms_up_then_decays_to_min_at_the_budget_s_end(decay):
    optim = OptimConfig(
        schedule="budget", budget_decay=decay, lr=4e-3, warmup_steps=100, min_lr=1e-5
    )

    def lr(step, progress, peak=0.2):
        return learning_rate(
            step, optim, d_model=128, max_updates=8000, progress=progress, peak_progress=peak
        )

    assert lr(50, 0.1, peak=0.0) == pytest.approx(2e-3)  # the warm-up, half-way up, whatever
    assert lr(50, 0.9, peak=0.0) == pytest.approx(2e-3)  # the clock says
    assert lr(100, 0.2) == pytest.approx(4e-3)  # the peak, when the warm-up ends
    assert lr(400, 0.6) == pytest.approx(1e-5 + (4e-3 - 1e-5) * 0.5)  # half the rest spent
    assert lr(5000, 1.0) == pytest.approx(1e-5)  # annealed when the budget is spent
    assert lr(5000, 1.5) == pytest.approx(1e-5)
    # a function of the update and the progress only: a resumed run continues it exactly
    values = [lr(s, p) for s, p in ((100, 0.2), (200, 0.3), (300, 0.7), (400, 0.99))]
    assert values == sorted(values, reverse=True)
    if decay == "cosine":  # flatter than linear early, steeper late
        linear = OptimConfig(schedule="budget", lr=4e-3, warmup_steps=100, min_lr=1e-5)
        early = learning_rate(
            200, linear, d_model=128, max_updates=8000, progress=0.3, peak_progress=0.2
        )
        assert lr(200, 0.3) > early


def test_the_budget_schedule_is_continuous_where_the_warm_up_ends():
    optim = OptimConfig(schedule="budget", lr=4e-3, warmup_steps=800)

    def lr(step, progress):
        return learning_rate(
            step, optim, d_model=128, max_updates=8000, progress=progress, peak_progress=0.4
        )

    assert lr(800, 0.4) == pytest.approx(4e-3) == lr(801, 0.4)
    assert lr(801, 0.4005) == pytest.approx(4e-3, rel=1e-3)


def test_the_fast_loss_counts_an_output_bias_as_the_reference_does():
    """A projection with a bias (an imported Marian model's) trains on its biased logits."""
    import torch

    from aiayn.accel import FAST, REFERENCE
    from aiayn.modules import OutputProjection

    torch.manual_seed(0)
    output = OutputProjection(d_model=8, vocab_size=11, bias=True)
    with torch.no_grad():
        output.proj.bias.normal_(0.0, 3.0)
    hidden, target = torch.randn(5, 8), torch.randint(0, 11, (5,))
    reference = REFERENCE.loss(hidden, output, target, epsilon=0.1)
    fast = FAST.loss(hidden, output, target, epsilon=0.1)
    unbiased = FAST.loss(hidden, OutputProjection(d_model=8, vocab_size=11), target, epsilon=0.1)
    torch.testing.assert_close(fast, reference)
    assert not torch.allclose(unbiased[1], reference[1])
