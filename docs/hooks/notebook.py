"""The tutorial's notebook: built from its jupytext source (``docs/tutorial/walkthrough.py``,
percent format) with an install cell, and a Colab badge when ``pyproject.toml`` names the
repository (``[project.urls] Repository``); run in a Jupyter kernel as a reader would.

    python docs/hooks/notebook.py     # writes docs/tutorial/tutorial.ipynb from the source

``tests/docs/test_notebook.py`` fails when the committed notebook is not what this builds.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

ROOT = Path(__file__).resolve().parents[2]
SOURCE = ROOT / "docs" / "tutorial" / "walkthrough.py"
NOTEBOOK = ROOT / "docs" / "tutorial" / "tutorial.ipynb"
COLAB = "https://colab.research.google.com/github/{path}/blob/main/docs/tutorial/tutorial.ipynb"
BADGE = "https://colab.research.google.com/assets/colab-badge.svg"


def repository_url(pyproject: Path = ROOT / "pyproject.toml") -> str | None:
    """``[project.urls] Repository`` of ``pyproject``, or None where it names none."""
    urls = tomllib.loads(pyproject.read_text(encoding="utf-8"))["project"].get("urls", {})
    url = urls.get("Repository")
    return url.rstrip("/").removesuffix(".git") if url else None


def install_source(url: str | None) -> str:
    """The notebook's first code cell: installs aiayn where it is missing (Colab) from the
    repository at ``url``; without one, it says how to install aiayn from a clone."""
    if url is None:
        return (
            "# aiayn, installed from a clone of its repository: in a virtual environment,\n"
            "# PyTorch first, then `pip install -e .` in the clone (the tutorial page shows how)\n"
            "import importlib.util\n\n"
            'if importlib.util.find_spec("aiayn") is None:\n'
            '    raise ModuleNotFoundError("install aiayn first: '
            'pip install -e . in a clone of its repository")'
        )
    head = (
        "# aiayn, where it is not installed yet (Colab, a fresh virtual environment)\n"
        "import importlib.util\n\n"
    )
    return head + (
        "import subprocess\n"
        "import sys\n\n"
        'if importlib.util.find_spec("aiayn") is None:\n'
        f'    subprocess.check_call([sys.executable, "-m", "pip", "install", "aiayn @ git+{url}"])'
    )


def badge_source(url: str) -> str:
    """A markdown cell: the Colab badge of the committed notebook at ``url`` (GitHub)."""
    path = url.removeprefix("https://github.com/")
    return f"[![Open in Colab]({BADGE})]({COLAB.format(path=path)})"


def build(source: Path = SOURCE, url: str | None = None) -> Any:
    """The notebook of ``source``: its cells after the title, a badge (with ``url``) and the
    install cell; cell ids numbered, so that the same source gives the same file."""
    import jupytext
    from nbformat import v4

    book = jupytext.read(source)
    book.metadata.pop("jupytext", None)
    added = [v4.new_markdown_cell(badge_source(url))] if url else []
    added.append(v4.new_code_cell(install_source(url)))
    book.cells[1:1] = added
    for number, cell in enumerate(book.cells):
        cell.id = f"cell-{number}"
    return book


def text(book: Any) -> str:
    """The notebook as the file holds it."""
    import nbformat

    return nbformat.writes(book) + "\n"


EXECUTED = "executed.ipynb"  # the notebook as it ran, its outputs and pictures in it


def execute(book: Any, figures: Path, *, timeout: int = 600) -> None:
    """Run every cell of ``book`` in a fresh kernel as a reader's Jupyter does (the pictures
    shown inline, in its outputs), also writing them to ``figures``, with the executed
    notebook (``EXECUTED``).

    Raises:
        nbclient.exceptions.CellExecutionError: a cell failed (the error names the cell).
    """
    from nbclient import NotebookClient

    figures.mkdir(parents=True, exist_ok=True)
    previous = os.environ.get("AIAYN_FIGURES")
    os.environ["AIAYN_FIGURES"] = str(figures)  # the kernel inherits it
    try:
        NotebookClient(
            book,
            timeout=timeout,
            kernel_name="python3",
            resources={"metadata": {"path": str(figures)}},
        ).execute()
        (figures / EXECUTED).write_text(text(book), encoding="utf-8")
    finally:
        if previous is None:
            os.environ.pop("AIAYN_FIGURES", None)
        else:
            os.environ["AIAYN_FIGURES"] = previous


if __name__ == "__main__":
    NOTEBOOK.write_text(text(build(url=repository_url())), encoding="utf-8")
    print(f"wrote {NOTEBOOK.relative_to(ROOT)}")
