"""Training curves from a run's ``metrics.jsonl``."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from aiayn.train.metrics import METRICS_FILE
from aiayn.viz.common import pyplot


def read_metrics(run_dir: str | Path) -> dict[str, list[dict[str, float]]]:
    """Rows of the run's metrics log grouped by kind (``train``, ``valid``), by update.

    A resumed run may log an update twice; the later row wins.
    """
    path = Path(run_dir) / METRICS_FILE
    if not path.is_file():
        raise FileNotFoundError(f"{path}: no metrics log (is {run_dir} a run directory?)")
    rows: dict[str, dict[int, dict[str, float]]] = {}
    for line in path.read_text().splitlines():
        if line.strip():
            row = json.loads(line)
            rows.setdefault(row["kind"], {})[row["update"]] = row
    return {kind: [by_update[u] for u in sorted(by_update)] for kind, by_update in rows.items()}


def _bleu_title(beam: float | None) -> str:
    """Which search the validation BLEU came from, when the log says (``run.valid_beam``)."""
    if beam is None:
        return "Validation BLEU"
    return "Validation BLEU (greedy)" if beam == 1 else f"Validation BLEU (beam {beam:g})"


def curves_figure(run_dir: str | Path) -> Any:
    """Loss (training and validation), learning rate, and validation BLEU if logged."""
    metrics = read_metrics(run_dir)
    train, valid = metrics.get("train", []), metrics.get("valid", [])
    has_bleu = any("bleu" in r for r in valid)
    plt = pyplot()
    fig, axes = plt.subplots(1, 3 if has_bleu else 2, figsize=(15 if has_bleu else 10, 4))
    loss, lr = axes[0], axes[1]
    for rows, name, style in ((train, "train", "-"), (valid, "valid", "o-")):
        if rows:
            loss.plot(
                [r["update"] for r in rows],
                [r["nll"] for r in rows],
                style,
                label=f"{name} NLL",
                markersize=3,
            )
    if train:
        loss.plot(
            [r["update"] for r in train],
            [r["loss"] for r in train],
            ":",
            label="train loss (label-smoothed)",
        )
        lr.plot([r["update"] for r in train], [r["lr"] for r in train])
    loss.set_title("Loss per target token (nats)")
    loss.set_xlabel("update")
    loss.legend()
    lr.set_title("Learning rate")
    lr.set_xlabel("update")
    if has_bleu:
        bleu_rows = [r for r in valid if "bleu" in r]
        axes[2].plot([r["update"] for r in bleu_rows], [r["bleu"] for r in bleu_rows], "o-")
        axes[2].set_title(_bleu_title(bleu_rows[-1].get("bleu_beam")))
        axes[2].set_xlabel("update")
    for ax in axes:
        ax.grid(alpha=0.3)
    fig.suptitle(str(run_dir))
    return fig
