"""aiayn as users install it: ``python -m build`` makes an sdist and, from it, a wheel, which
installs into a fresh virtual environment and runs ``aiayn --help`` and a translation."""

from __future__ import annotations

import os
import subprocess
import sys
import sysconfig
import tarfile
import zipfile
from pathlib import Path

import pytest

import aiayn

pytest.importorskip("build", reason="the build package is in the dev extra")
REPO = Path(__file__).resolve().parents[1]


def _run(argv: list, **kwargs) -> subprocess.CompletedProcess:
    done = subprocess.run(argv, capture_output=True, text=True, timeout=300, **kwargs)
    assert done.returncode == 0, f"{argv}:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    return done


@pytest.mark.slow
def test_the_wheel_installs_and_translates(tmp_path, trained_model_dir):
    dist = tmp_path / "dist"
    # --no-isolation: the build backend installed here, not one downloaded (no network)
    _run([sys.executable, "-m", "build", "--no-isolation", "--outdir", str(dist), str(REPO)])
    (sdist,) = dist.glob("aiayn-*.tar.gz")
    (wheel,) = dist.glob("aiayn-*.whl")
    version = f"aiayn-{aiayn.__version__}"
    with tarfile.open(sdist) as archive:
        names = set(archive.getnames())
    for name in ("LICENSE", "README.md", "pyproject.toml", "src/aiayn/py.typed"):
        assert f"{version}/{name}" in names, name
    with zipfile.ZipFile(wheel) as archive:
        names = set(archive.namelist())
    assert "aiayn/py.typed" in names and "aiayn/cli/__init__.py" in names
    assert any(n.endswith(".dist-info/licenses/LICENSE") or n.endswith("/LICENSE") for n in names)
    assert not any(n.startswith(("tests/", "docs/", "bench/")) for n in names)

    venv = tmp_path / "venv"
    # this pip installs into it (pip --python), not a copy of pip made in it
    _run([sys.executable, "-m", "venv", "--without-pip", str(venv)])
    python, command = venv / "bin" / "python", venv / "bin" / "aiayn"
    _see_these_dependencies(python)
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    pip = [sys.executable, "-m", "pip", "--python", str(python)]
    _run([*pip, "install", "-q", "--no-deps", "--no-index", str(wheel)], env=env)
    where = _run([python, "-c", "import aiayn; print(aiayn.__file__)"], env=env, cwd=tmp_path)
    assert Path(where.stdout.strip()).is_relative_to(venv), where.stdout
    assert "translate" in _run([command, "--help"], env=env, cwd=tmp_path).stdout
    translated = _run(
        [command, "translate", "--model", str(trained_model_dir), "--beam", "2"],
        input="the dog runs\na big red ball\n",
        env={**env, "OMP_NUM_THREADS": "1"},
        cwd=tmp_path,
    )
    assert len(translated.stdout.splitlines()) == 2


def _see_these_dependencies(python: Path) -> None:
    """Let the fresh environment of ``python`` import the dependencies installed here (torch
    and the rest: no network in tests) after its own packages: a ``.pth`` file naming this
    environment's site directories. ``--system-site-packages`` would name the base Python's
    instead, which has none of them on a fresh machine. A path a ``.pth`` names runs no
    ``.pth`` of its own, so an editable aiayn here stays out of it."""
    own = _run([python, "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"]).stdout
    here = {sysconfig.get_path("purelib"), sysconfig.get_path("platlib")}
    (Path(own.strip()) / "dependencies_of_the_test.pth").write_text("\n".join(sorted(here)) + "\n")
