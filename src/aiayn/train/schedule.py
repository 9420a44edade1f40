"""Learning-rate schedules as pure functions of the update number (1-based) and, for the
budget schedule, of the run's progress through its budget."""

from __future__ import annotations

import math

from aiayn.config import OptimConfig


# --8<-- [start:noam_lr]
def noam_lr(step: int, *, d_model: int, warmup_steps: int, scale: float = 1.0) -> float:
    """§5.3, eq. (3): lrate = d_model^-0.5 · min(step^-0.5, step · warmup_steps^-1.5)."""
    step = max(step, 1)
    return scale * d_model**-0.5 * min(step**-0.5, step * warmup_steps**-1.5)


# --8<-- [end:noam_lr]


def linear_warmup(step: int, *, init_lr: float, peak_lr: float, warmup_steps: int) -> float:
    """The warm-up of inverse_sqrt, cosine and budget: a straight line from ``init_lr`` at
    step 0 to ``peak_lr`` at ``warmup_steps``."""
    return init_lr + (peak_lr - init_lr) * step / warmup_steps


def inverse_sqrt_lr(step: int, *, peak_lr: float, warmup_steps: int, init_lr: float = 0.0) -> float:
    """fairseq's inverse_sqrt: linear warm-up from ``init_lr`` to ``peak_lr``, then
    ``peak_lr · sqrt(warmup_steps / step)``. Same shape as the paper's, with an explicit peak."""
    if step < warmup_steps:
        return linear_warmup(step, init_lr=init_lr, peak_lr=peak_lr, warmup_steps=warmup_steps)
    return peak_lr * math.sqrt(warmup_steps / max(step, 1))


def cosine_lr(
    step: int,
    *,
    peak_lr: float,
    warmup_steps: int,
    decay_steps: int,
    min_lr: float,
    init_lr: float = 0.0,
) -> float:
    """Linear warm-up, then half a cosine from ``peak_lr`` down to ``min_lr`` at ``decay_steps``."""
    if step < warmup_steps:
        return linear_warmup(step, init_lr=init_lr, peak_lr=peak_lr, warmup_steps=warmup_steps)
    if step >= decay_steps:
        return min_lr
    progress = (step - warmup_steps) / max(decay_steps - warmup_steps, 1)
    return min_lr + 0.5 * (1.0 + math.cos(math.pi * progress)) * (peak_lr - min_lr)


def budget_lr(
    step: int,
    progress: float,
    *,
    peak_lr: float,
    warmup_steps: int,
    peak_progress: float = 0.0,
    min_lr: float = 0.0,
    init_lr: float = 0.0,
    decay: str = "linear",
) -> float:
    """Budgeted training (Li, Yumer & Ramanan, ICLR 2020; Geiping & Goldstein 2022): a linear
    warm-up over ``warmup_steps`` updates to ``peak_lr``, then a decay over the rest of the
    run's ``progress`` in [0, 1] (a share of its updates or of its time, whichever is
    further), linear or half a cosine, down to ``min_lr`` when the budget is spent.
    ``peak_progress``: the progress when the warm-up ended, where the decay starts. A run cut
    short by its clock ends annealed, as a fixed schedule cut short does not."""
    if step <= warmup_steps:
        return linear_warmup(step, init_lr=init_lr, peak_lr=peak_lr, warmup_steps=warmup_steps)
    left = min(max((1.0 - progress) / max(1.0 - peak_progress, 1e-9), 0.0), 1.0)
    shape = left if decay == "linear" else 0.5 * (1.0 - math.cos(math.pi * left))
    return min_lr + (peak_lr - min_lr) * shape


def learning_rate(
    step: int,
    optim: OptimConfig,
    *,
    d_model: int,
    max_updates: int,
    progress: float = 0.0,
    peak_progress: float = 0.0,
) -> float:
    """The learning rate for update ``step`` under ``optim.schedule``; ``progress``: the
    run's share of its budget spent, ``peak_progress`` that share at the warm-up's end (the
    budget schedule's clock, ``budget_lr``)."""
    if optim.schedule == "budget":
        return budget_lr(
            step,
            progress,
            peak_lr=optim.lr,
            warmup_steps=optim.warmup_steps,
            peak_progress=peak_progress,
            min_lr=optim.min_lr,
            init_lr=optim.warmup_init_lr,
            decay=optim.budget_decay,
        )
    if optim.schedule == "noam":
        return noam_lr(step, d_model=d_model, warmup_steps=optim.warmup_steps, scale=optim.lr_scale)
    if optim.schedule == "inverse_sqrt":
        return inverse_sqrt_lr(
            step, peak_lr=optim.lr, warmup_steps=optim.warmup_steps, init_lr=optim.warmup_init_lr
        )
    if optim.schedule == "cosine":
        return cosine_lr(
            step,
            peak_lr=optim.lr,
            warmup_steps=optim.warmup_steps,
            decay_steps=optim.decay_steps or max_updates,
            min_lr=optim.min_lr,
            init_lr=optim.warmup_init_lr,
        )
    return optim.lr
