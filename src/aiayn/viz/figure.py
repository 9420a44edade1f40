"""Lazy matplotlib: shown inline in Jupyter, headless (Agg) everywhere else; a figure is written
to a file only when asked (``save_figure``)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from aiayn.errors import AiaynError

FORMATS = (".png", ".svg")


class PlotError(AiaynError, ValueError):
    """A plot that cannot be drawn as asked (a layer the model does not have, a bad path)."""


def pyplot() -> Any:
    """``matplotlib.pyplot``: in a Jupyter kernel with the backend the kernel chose (its
    inline backend shows each figure under its cell), elsewhere Agg (no display needed)."""
    import matplotlib

    if "ipykernel" not in sys.modules:
        matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def check_figure_path(path: str | Path) -> Path:
    """``path`` if a figure can be written there (.png or .svg, in an existing directory
    or one that can be made)."""
    path = Path(path)
    if path.suffix.lower() not in FORMATS:
        raise PlotError(f"{path}: write .png or .svg")
    if path.is_dir():
        raise PlotError(f"{path}: is a directory")
    for parent in path.parents:
        if parent.exists():
            if not parent.is_dir():
                raise PlotError(f"{path}: {parent} is not a directory")
            break
    return path


def save_figure(figure: Any, path: str | Path, *, dpi: int = 110, close: bool = True) -> Path:
    """Write ``figure`` as PNG or SVG (by the file's extension); close it unless ``close`` is
    false (a notebook that also shows it)."""
    path = check_figure_path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(path, dpi=dpi, bbox_inches="tight")
    if close:
        pyplot().close(figure)
    return path
