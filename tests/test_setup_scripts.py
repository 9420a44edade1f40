"""The README's two commands (``scripts/run.sh``, ``scripts/test.sh``) set up a virtual
environment and install into it only, so they work where pip refuses the system's Python
(PEP 668). Run here against a stand-in ``python3`` that records what it is asked to do; the
real installation is what CI does with ``scripts/test.sh`` on a fresh clone."""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]

SYSTEM_PYTHON = """#!/usr/bin/env bash
echo "python3 $*" >> "$LOG"
if [ "$1" = -m ] && [ "$2" = venv ]; then
    mkdir -p "$3/bin"
    [ -n "${NO_VENV:-}" ] && exit 1
    cp "$STUBS/python" "$STUBS/aiayn" "$3/bin/"
    echo "export PATH=\\"$(cd "$3" && pwd)/bin:\\$PATH\\"" > "$3/bin/activate"
fi
"""
VENV_PROGRAM = '#!/usr/bin/env bash\necho "{name} $*" >> "$LOG"\n'
# the venv's python: "-c" is the probe of PyTorch's CPU index, which fails with UNREACHABLE set
VENV_PYTHON = VENV_PROGRAM + '[ "$1" = -c ] && [ -n "${{UNREACHABLE:-}}" ] && exit 1\nexit 0\n'
CPU_INDEX = "--extra-index-url https://download.pytorch.org/whl/cpu "


@pytest.fixture
def clone(tmp_path) -> tuple[Path, dict[str, str]]:
    """A copy of the scripts, with a stand-in python3 first on PATH."""
    root, stubs, bin_dir = tmp_path / "clone", tmp_path / "stubs", tmp_path / "bin"
    (root / "scripts").mkdir(parents=True)
    for name in ("run.sh", "test.sh", "venv.sh"):
        shutil.copy(REPO / "scripts" / name, root / "scripts" / name)
    (root / "scripts" / "install_chromium.sh").write_text("exit 0\n")
    for directory, name, text in (
        (bin_dir, "python3", SYSTEM_PYTHON),
        (stubs, "python", VENV_PYTHON.format(name="venv-python")),
        (stubs, "aiayn", VENV_PROGRAM.format(name="venv-aiayn")),
    ):
        directory.mkdir(exist_ok=True)
        (directory / name).write_text(text)
        (directory / name).chmod(stat.S_IRWXU)
    env = {
        "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}",
        "LOG": str(tmp_path / "log"),
        "STUBS": str(stubs),
        "PIP_REQUIRE_VIRTUALENV": "1",
        "HOME": str(tmp_path),
    }
    return root, env


def _run(root: Path, env: dict[str, str], *argv: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        ["bash", *argv], cwd=root, env=env, capture_output=True, text=True, timeout=60
    )


def _log(env: dict[str, str]) -> list[str]:
    return Path(env["LOG"]).read_text().splitlines()


def _calls(env: dict[str, str]) -> list[str]:
    """What the scripts ran, less the version check and the index probe (``-c``)."""
    return [line for line in _log(env) if not line.startswith(("python3 -c", "venv-python -c"))]


def test_run_sh_makes_the_venv_installs_torch_first_then_runs_the_pipeline(clone):
    root, env = clone
    done = _run(root, env, "scripts/run.sh", "--set", "run.max_minutes=1")
    assert done.returncode == 0, done.stderr
    calls = _calls(env)
    assert calls == [
        "python3 -m venv .venv",
        f"venv-python -m pip install --quiet --no-compile {CPU_INDEX}torch==2.13.0",
        "venv-python -m pip install --quiet --no-compile -e .",
        "venv-python -m compileall -qq -j 0 .venv/lib",
        "venv-aiayn pipeline configs/multi30k_en_de_tiny_raw.toml --set run.max_minutes=1",
    ]


def test_test_sh_reuses_the_venv_and_installs_the_dev_extra(clone):
    root, env = clone
    assert _run(root, env, "scripts/test.sh", "-x").returncode == 0
    assert _run(root, env, "scripts/test.sh", "tests/test_masks.py").returncode == 0
    calls = _calls(env)
    assert calls.count("python3 -m venv .venv") == 1
    assert calls[1:4] == [
        f"venv-python -m pip install --quiet --no-compile {CPU_INDEX}torch==2.13.0",
        "venv-python -m pip install --quiet --no-compile -e .[dev]",
        "venv-python -m compileall -qq -j 0 .venv/lib",
    ]
    assert calls[4].startswith("venv-python -m pytest ") and calls[4].endswith(" -x")
    assert calls[-1].startswith("venv-python -m pytest ")
    assert calls[-1].endswith(" tests/test_masks.py")


def test_venv_sh_alone_only_installs_and_says_how_to_activate(clone):
    """``bash scripts/venv.sh serve``, the install-only command: .venv with PyTorch (its CPU
    build from PyTorch's index where no NVIDIA GPU is found) and aiayn with the extra asked
    for, nothing run, and the line that activates it."""
    root, env = clone
    done = _run(root, env, "scripts/venv.sh", "serve")
    assert done.returncode == 0, done.stderr
    assert _calls(env) == [
        "python3 -m venv .venv",
        f"venv-python -m pip install --quiet --no-compile {CPU_INDEX}torch==2.13.0",
        "venv-python -m pip install --quiet --no-compile -e .[serve]",
        "venv-python -m compileall -qq -j 0 .venv/lib",
    ]
    assert "source .venv/bin/activate" in done.stdout


def test_without_python3_venv_the_scripts_say_what_to_install(clone):
    root, env = clone
    done = _run(root, {**env, "NO_VENV": "1"}, "scripts/run.sh")
    assert done.returncode == 2
    assert done.stderr.strip().splitlines()[-1].startswith("could not create .venv: on Debian")
    assert not (root / ".venv").exists()
    assert not any(line.startswith("venv-") for line in _log(env))


def test_a_python_older_than_3_10_is_refused_in_one_line(clone, tmp_path):
    root, env = clone
    old = tmp_path / "python3.9"
    old.write_text("#!/usr/bin/env bash\nexit 1\n")  # the version check fails
    old.chmod(stat.S_IRWXU)
    done = _run(root, {**env, "AIAYN_PYTHON": str(old)}, "scripts/test.sh")
    assert done.returncode == 2
    assert done.stderr.strip() == (
        f"aiayn needs Python 3.10 or newer as {old} (set AIAYN_PYTHON=/path/to/python3.X)"
    )


@pytest.mark.parametrize("where", ["an NVIDIA GPU", "PyTorch's index unreachable"])
def test_torch_comes_from_the_default_index_with_a_gpu_or_without_pytorch_s(clone, where):
    """The CPU build from PyTorch's index only where no NVIDIA GPU is found and that index
    answers; otherwise the default index's build (CUDA's on Linux), as pip chooses it."""
    root, env = clone
    if where == "an NVIDIA GPU":
        nvidia_smi = Path(env["STUBS"]).parent / "bin" / "nvidia-smi"
        nvidia_smi.write_text("#!/usr/bin/env bash\necho 'GPU 0: NVIDIA H100'\n")
        nvidia_smi.chmod(stat.S_IRWXU)
    else:
        env["UNREACHABLE"] = "1"
    assert _run(root, env, "scripts/run.sh").returncode == 0
    assert "venv-python -m pip install --quiet --no-compile torch==2.13.0" in _calls(env)
