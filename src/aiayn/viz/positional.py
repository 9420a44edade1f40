"""The §3.5 sinusoidal table, and how the encodings of two positions relate by distance.
Named after ``aiayn.modules.positional``, whose table it draws."""

from __future__ import annotations

from typing import Any

from aiayn.modules import sinusoid_table
from aiayn.viz.figure import pyplot


def positional_figure(*, d_model: int = 128, length: int = 100, interleaved: bool = True) -> Any:
    """Left: PE(pos, i) as a heatmap. Right: PE(p)·PE(p + k) against the offset k, for a
    few p — the same curve for every p, which is why relative positions are easy to attend to."""
    plt = pyplot()
    table = sinusoid_table(length, d_model, interleaved=interleaved)  # (T, D)
    fig, (heat, dots) = plt.subplots(
        1, 2, figsize=(13, 4.5), width_ratios=(1.4, 1), layout="constrained"
    )
    image = heat.imshow(
        table.T.numpy(),
        aspect="auto",
        cmap="RdBu_r",
        vmin=-1,
        vmax=1,
        origin="lower",
        interpolation="nearest",
    )
    heat.set_xlabel("position")
    heat.set_ylabel("dimension")
    layout = "sin on even, cos on odd dims" if interleaved else "[sin | cos]"
    heat.set_title(f"Sinusoidal positional encoding (§3.5), d_model={d_model}, {layout}")
    fig.colorbar(image, ax=heat, fraction=0.03)
    products = table @ table.T  # (T, T)
    for start in sorted({0, length // 4, length // 2}):
        offsets = range(0, length - start)
        dots.plot(
            list(offsets),
            [products[start, start + k].item() for k in offsets],
            label=f"p = {start}",
        )
    dots.set_xlabel("offset k")
    dots.set_ylabel("PE(p) · PE(p + k)")
    dots.set_title("Dot product against distance")
    dots.legend()
    dots.grid(alpha=0.3)
    return fig
