"""Training curves from a run's ``metrics.jsonl``."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from aiayn.train.metrics import Kind, Metric, read_metrics
from aiayn.viz.figure import pyplot


def _bleu_title(beam: float | None) -> str:
    """Which search the validation BLEU came from, when the log says (``run.valid_beam``)."""
    if beam is None:
        return "Validation BLEU"
    return "Validation BLEU (greedy)" if beam == 1 else f"Validation BLEU (beam {beam:g})"


def curves_figure(run_dir: str | Path) -> Any:
    """Loss (training and validation), learning rate, and validation BLEU if logged."""
    metrics = read_metrics(run_dir)
    train, valid = metrics.get(Kind.TRAIN, []), metrics.get(Kind.VALID, [])
    nll, loss, lr, bleu = Metric.NLL.value, Metric.LOSS.value, Metric.LR.value, Metric.BLEU.value
    has_bleu = any(bleu in r for r in valid)
    plt = pyplot()
    fig, axes = plt.subplots(1, 3 if has_bleu else 2, figsize=(15 if has_bleu else 10, 4))
    loss_axes, lr_axes = axes[0], axes[1]
    for rows, name, style in ((train, "train", "-"), (valid, "valid", "o-")):
        if rows:
            loss_axes.plot(
                [r["update"] for r in rows],
                [r[nll] for r in rows],
                style,
                label=f"{name} NLL",
                markersize=3,
            )
    if train:
        loss_axes.plot(
            [r["update"] for r in train],
            [r[loss] for r in train],
            ":",
            label="train loss (label-smoothed)",
        )
        lr_axes.plot([r["update"] for r in train], [r[lr] for r in train])
    loss_axes.set_title("Loss per target token (nats)")
    loss_axes.set_xlabel("update")
    loss_axes.legend()
    lr_axes.set_title("Learning rate")
    lr_axes.set_xlabel("update")
    if has_bleu:
        bleu_rows = [r for r in valid if bleu in r]
        axes[2].plot([r["update"] for r in bleu_rows], [r[bleu] for r in bleu_rows], "o-")
        axes[2].set_title(_bleu_title(bleu_rows[-1].get(Metric.BLEU_BEAM.value)))
        axes[2].set_xlabel("update")
    for ax in axes:
        ax.grid(alpha=0.3)
    fig.suptitle(str(run_dir))
    return fig
