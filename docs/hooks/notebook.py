"""Run a jupytext notebook (percent format) in a Jupyter kernel, as a reader would."""

from __future__ import annotations

import os
from pathlib import Path


def execute(path: Path, figures: Path, *, timeout: int = 600) -> None:
    """Run every cell of ``path`` in a fresh kernel, its pictures written to ``figures``.

    Raises:
        nbclient.exceptions.CellExecutionError: a cell failed (the error names the cell).
    """
    import jupytext
    from nbclient import NotebookClient

    figures.mkdir(parents=True, exist_ok=True)
    book = jupytext.read(path)
    previous = os.environ.get("AIAYN_FIGURES")
    os.environ["AIAYN_FIGURES"] = str(figures)  # the kernel inherits it
    try:
        NotebookClient(
            book,
            timeout=timeout,
            kernel_name="python3",
            resources={"metadata": {"path": str(figures)}},
        ).execute()
    finally:
        if previous is None:
            os.environ.pop("AIAYN_FIGURES", None)
        else:
            os.environ["AIAYN_FIGURES"] = previous
