"""What training asks of the model (§5.3, §5.4): the learning-rate schedules, and the
target distribution that label smoothing puts in place of the one-hot reference."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch
import torch.nn.functional as F

from aiayn.train.schedule import budget_lr, inverse_sqrt_lr, noam_lr
from aiayn.viz.figure import pyplot


def schedule_figure(
    *,
    settings: Sequence[tuple[int, int]] = ((512, 4000), (512, 8000), (256, 4000)),
    peak_lr: float = 0.004,
    warmup_steps: int = 800,
    steps: int = 8000,
    budget_ends: Sequence[int] = (8000, 3000),
) -> Any:
    """Left: the paper's schedule (``noam_lr``) for each (d_model, warmup_steps) of
    ``settings``. Right: fairseq's ``inverse_sqrt_lr`` with an explicit peak (a linear rise,
    then a fall with 1/√step) beside the budget schedule (``budget_lr``, linear) of runs whose
    budget ends at each update of ``budget_ends``: at ``max_updates`` on a fast CPU, earlier
    where the clock ends it. The defaults are the Multi30k recipes' (``optim.lr`` 0.004,
    ``optim.warmup_steps`` 800, ``run.max_updates`` 8000)."""
    plt = pyplot()
    updates = list(range(1, steps + 1, max(1, steps // 500)))
    fig, (noam, practice) = plt.subplots(1, 2, figsize=(12, 4), layout="constrained")
    noam_steps = list(range(1, 20_001, 40))
    for d_model, warmup in settings:
        noam.plot(
            noam_steps,
            [noam_lr(s, d_model=d_model, warmup_steps=warmup) for s in noam_steps],
            label=f"d_model {d_model}, warm-up {warmup}",
        )
    noam.set_title("noam_lr: d_model^-0.5 · min(step^-0.5, step · warmup^-1.5)  (§5.3)")
    practice.plot(
        updates,
        [inverse_sqrt_lr(s, peak_lr=peak_lr, warmup_steps=warmup_steps) for s in updates],
        color="C3",
        label=f"inverse_sqrt: peak {peak_lr:g}, warm-up {warmup_steps}",
    )
    for end, style in zip(budget_ends, ("-", "--"), strict=False):
        shown = [s for s in updates if s <= end]
        peak = warmup_steps / end  # the progress when the warm-up ends
        rates = [
            budget_lr(s, s / end, peak_lr=peak_lr, warmup_steps=warmup_steps, peak_progress=peak)
            for s in shown
        ]
        practice.plot(
            shown, rates, "C0" + style, label=f"budget, linear: its budget ends at {end:,}"
        )
    practice.set_title("inverse_sqrt (fairseq) and the budget schedule: to 0 when time is up")
    for ax in (noam, practice):
        ax.set_xlabel("update (step)")
        ax.set_ylabel("learning rate")
        ax.grid(alpha=0.3)
        ax.legend()
    return fig


def smoothed_target(vocab_size: int, target: int, epsilon: float) -> torch.Tensor:
    """(V,) the distribution that ``F.cross_entropy(..., label_smoothing=epsilon)`` (the
    loss of ``label_smoothed_nll``) trains the softmax towards, read from the loss itself:
    its gradient with respect to the logits is softmax(logits) − target distribution."""
    logits = torch.zeros(1, vocab_size, requires_grad=True)  # softmax: uniform
    F.cross_entropy(logits, torch.tensor([target]), label_smoothing=epsilon).backward()
    return torch.full((vocab_size,), 1.0 / vocab_size) - logits.grad[0]


def smoothing_figure(*, vocab_size: int = 12, target: int = 5, epsilon: float = 0.1) -> Any:
    """Left: the one-hot reference and the label-smoothed target over a small vocabulary.
    Right: the loss against the probability given to the reference token, with and without
    smoothing (the rest spread evenly): smoothing stops rewarding certainty."""
    plt = pyplot()
    smoothed = smoothed_target(vocab_size, target, epsilon)
    one_hot = smoothed_target(vocab_size, target, 0.0)
    fig, (bars, curve) = plt.subplots(1, 2, figsize=(12, 4), layout="constrained")
    ids = range(vocab_size)
    bars.bar([i - 0.2 for i in ids], one_hot.tolist(), width=0.4, label="one-hot reference")
    bars.bar([i + 0.2 for i in ids], smoothed.tolist(), width=0.4, label=f"ε_ls = {epsilon:g}")
    bars.set_xticks(list(ids))
    bars.set_xlabel(f"token id (the reference is {target})")
    bars.set_ylabel("target probability")
    bars.set_title(f"What the loss trains towards, vocabulary of {vocab_size}  (§5.4)")
    bars.legend()
    probabilities = torch.linspace(0.05, 0.995, 200)
    for eps in (0.0, epsilon):
        losses = [_loss_at(p.item(), vocab_size, target, eps) for p in probabilities]
        curve.plot(probabilities.tolist(), losses, label=f"ε_ls = {eps:g}")
    best = 1 - epsilon + epsilon / vocab_size
    curve.axvline(best, color="grey", linestyle=":", label=f"smoothed optimum p = {best:.3f}")
    curve.set_xlabel("probability the model gives the reference token")
    curve.set_ylabel("loss (nats)")
    curve.set_title("The loss stops rewarding certainty")
    curve.legend()
    for ax in (bars, curve):
        ax.grid(alpha=0.3)
    return fig


def _loss_at(p: float, vocab_size: int, target: int, epsilon: float) -> float:
    """The label-smoothed loss of a softmax giving ``p`` to ``target``, the rest evenly."""
    probs = torch.full((1, vocab_size), (1 - p) / (vocab_size - 1))
    probs[0, target] = p
    loss = F.cross_entropy(probs.log(), torch.tensor([target]), label_smoothing=epsilon)
    return loss.item()
