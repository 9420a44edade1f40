"""The tutorial's notebook (``docs/tutorial/tutorial.ipynb``) is what ``docs/hooks/notebook.py``
builds from its jupytext source, with the install cell a reader outside a clone needs. The
documentation's build runs it (``test_site``)."""

from __future__ import annotations

import importlib.util

import pytest

from .blocks import REPO

pytest.importorskip("jupytext", reason="the documentation's packages are in the dev extra")

_spec = importlib.util.spec_from_file_location("notebook", REPO / "docs" / "hooks" / "notebook.py")
notebook = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(notebook)


def test_the_committed_notebook_is_built_from_its_source():
    built = notebook.text(notebook.build(url=notebook.repository_url()))
    committed = notebook.NOTEBOOK.read_text(encoding="utf-8")
    assert committed == built, "run: python docs/hooks/notebook.py"


def test_with_a_repository_url_the_notebook_has_a_colab_badge_and_installs_from_it(tmp_path):
    url = "https://github.com/someone/aiayn"
    pyproject = tmp_path / "pyproject.toml"
    pyproject.write_text(f'[project]\nname = "aiayn"\n[project.urls]\nRepository = "{url}.git"\n')
    assert notebook.repository_url(pyproject) == url
    book = notebook.build(url=url)
    badge, install = book.cells[1], book.cells[2]
    assert badge.cell_type == "markdown" and install.cell_type == "code"
    colab = "https://colab.research.google.com/github/someone/aiayn/blob/main/"
    assert f"({colab}docs/tutorial/tutorial.ipynb)" in badge.source
    assert f'"aiayn @ git+{url}"' in install.source
    compile(install.source, "install", "exec")


def test_without_a_repository_url_the_install_cell_says_what_to_do(tmp_path):
    pyproject = tmp_path / "pyproject.toml"
    pyproject.write_text('[project]\nname = "aiayn"\n')
    assert notebook.repository_url(pyproject) is None
    book = notebook.build(url=None)
    install = book.cells[1]
    assert install.cell_type == "code" and "pip install -e ." in install.source
    assert not any("colab" in cell.source for cell in book.cells)
    namespace: dict = {}
    exec(compile(install.source, "install", "exec"), namespace)  # aiayn is installed: no-op


def test_the_notebook_checks_its_shapes_and_its_copy_accuracy():
    code = "\n".join(c.source for c in notebook.build().cells if c.cell_type == "code")
    assert "assert memory.shape == (B, S, D) and logits.shape == (B, T, VOCAB)" in code
    assert "assert accuracy > 0.9" in code
