"""The three attention masks of a batch (§3.2.3), drawn as the model applies them. Named after
``aiayn.masks``, whose masks it draws.

Shapes: B batch, S source length, T target length.
"""

from __future__ import annotations

from typing import Any

from torch import Tensor

from aiayn import masks
from aiayn.viz.figure import pyplot

TITLES = ("encoder self-attention", "decoder self-attention", "encoder–decoder attention")


def batch_masks(src: Tensor, tgt: Tensor, *, pad_id: int) -> tuple[Tensor, Tensor, Tensor]:
    """The masks ``aiayn.masks`` builds for ``src`` (B, S) and ``tgt`` (B, T), broadcast to
    one (query, key) grid per sentence: (B, S, S), (B, T, T) and (B, T, S) bool,
    True = attend."""
    b, s, t = src.size(0), src.size(1), tgt.size(1)
    source = masks.padding_mask(src, pad_id)  # (B, 1, 1, S)
    target = masks.decoder_self_mask(tgt, pad_id)  # (B, 1, T, T)
    return (
        source.expand(b, 1, s, s)[:, 0],  # (B, S, S)
        target.expand(b, 1, t, t)[:, 0],  # (B, T, T)
        source.expand(b, 1, t, s)[:, 0],  # (B, T, S)
    )


def masks_figure(src: Tensor, tgt: Tensor, *, pad_id: int) -> Any:
    """One row per sentence, one column per attention: a query (row) may attend a key
    (column) where the cell is light."""
    grids = batch_masks(src, tgt, pad_id=pad_id)
    plt = pyplot()
    fig, axes = plt.subplots(
        src.size(0), 3, squeeze=False, figsize=(10, 3.2 * src.size(0)), layout="constrained"
    )
    for row in range(src.size(0)):
        for col, grid in enumerate(grids):
            ax = axes[row][col]
            ax.imshow(grid[row].numpy(), cmap="gray", vmin=0, vmax=1, interpolation="nearest")
            ax.set_title(f"sentence {row + 1}: {TITLES[col]}", fontsize=9)
            ax.set_xlabel("key position", fontsize=8)
            ax.set_ylabel("query position", fontsize=8)
    return fig
