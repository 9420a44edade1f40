"""The tutorial's notebook (``docs/tutorial/tutorial.ipynb``) is what ``docs/hooks/notebook.py``
builds from its jupytext source, with the install cell a reader outside a clone needs. The
documentation's build runs it (``test_site``)."""

from __future__ import annotations

import ast
import importlib.metadata
import importlib.util
import os
import subprocess
import sys

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


def _core_distributions() -> set[str]:
    """aiayn and the distributions its own install brings (``[project].dependencies`` and
    theirs, as installed here): what the notebook's minimal install gives, no extra."""
    from packaging.requirements import Requirement
    from packaging.utils import canonicalize_name

    project = notebook.tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))
    todo = [(Requirement(line), {""}) for line in project["project"]["dependencies"]]
    core = {"aiayn"}
    while todo:
        requirement, extras = todo.pop()
        name = canonicalize_name(requirement.name)
        marker = requirement.marker
        if name in core or (marker and not any(marker.evaluate({"extra": e}) for e in extras)):
            continue
        core.add(name)
        try:
            requires = importlib.metadata.requires(name) or []
        except importlib.metadata.PackageNotFoundError:
            continue
        todo.extend((Requirement(line), {"", *requirement.extras}) for line in requires)
    return core


def _blocked_modules(core: set[str]) -> list[str]:
    """The importable names of every installed distribution outside ``core``."""
    from packaging.utils import canonicalize_name

    return sorted(
        module
        for module, dists in importlib.metadata.packages_distributions().items()
        if not any(canonicalize_name(d) in core for d in dists)
    )


def test_the_notebook_imports_nothing_outside_aiayns_own_install():
    """The tutorial page promises the notebook needs aiayn's install and none of its extras:
    its imports run with every other installed distribution made unimportable."""
    code = [c.source for c in notebook.build().cells if c.cell_type == "code"]
    imports = [
        ast.unparse(node)
        for node in ast.walk(ast.parse("\n".join(code)))
        if isinstance(node, (ast.Import, ast.ImportFrom))
    ]
    assert any("aiayn" in line for line in imports) and any("torch" in line for line in imports)
    blocked = _blocked_modules(_core_distributions())
    assert "fastapi" in blocked and "jupytext" in blocked and "torch" not in blocked
    script = (
        "import sys\n"
        f"for name in {blocked!r}:\n"
        "    sys.modules.setdefault(name, None)  # import name raises ImportError\n"
        + "\n".join(imports)
    )
    env = {**os.environ, "PYTHONPATH": str(REPO / "src")}
    done = subprocess.run(
        [sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr[-3000:]


def test_the_import_check_sees_an_extra(tmp_path):
    blocked = _blocked_modules(_core_distributions())
    script = f"import sys\nfor name in {blocked!r}:\n    sys.modules.setdefault(name, None)\n"
    done = subprocess.run(
        [sys.executable, "-c", script + "import fastapi"], capture_output=True, text=True
    )
    assert done.returncode != 0 and "fastapi" in done.stderr
