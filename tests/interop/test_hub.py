"""``aiayn import marian ORG/NAME``: an opus-mt model fetched from the Hugging Face Hub by its
id. No network here: the Hub's cache is laid out as a download leaves it, and the command
runs with ``HF_HUB_OFFLINE=1``, through huggingface_hub's own lookup."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("huggingface_hub", reason="huggingface_hub is a dependency")
pytest.importorskip("transformers", reason="transformers is a dev dependency")

from aiayn.interop.hub import is_hub_id

from .test_marian import _marian_dir

REPO = Path(__file__).resolve().parents[2]
COMMIT = "0123456789abcdef0123456789abcdef01234567"


def _aiayn(*argv: str, cache: Path, cwd: Path, stdin: str = "") -> subprocess.CompletedProcess:
    env = {
        **os.environ,
        "HF_HUB_CACHE": str(cache),
        "HF_HUB_OFFLINE": "1",
        "PYTHONPATH": os.pathsep.join(
            filter(None, [str(REPO / "src"), os.environ.get("PYTHONPATH")])
        ),
    }
    return subprocess.run(
        [sys.executable, "-m", "aiayn", *argv],
        env=env,
        cwd=cwd,
        input=stdin,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_a_hub_id_imports_from_the_hubs_cache(tmp_path):
    cache = tmp_path / "cache"
    snapshot = cache / "models--Helsinki-NLP--opus-mt-en-xx" / "snapshots" / COMMIT
    _marian_dir(tmp_path / "marian")
    shutil.copytree(tmp_path / "marian", snapshot)
    (snapshot.parents[1] / "refs").mkdir()
    (snapshot.parents[1] / "refs" / "main").write_text(COMMIT)
    done = _aiayn(
        "import",
        "marian",
        "Helsinki-NLP/opus-mt-en-xx",
        "--out",
        "en-xx",
        cache=cache,
        cwd=tmp_path,
    )
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "en-xx" / "model.safetensors").is_file()
    translated = _aiayn(
        "translate",
        "--model",
        "en-xx",
        "--beam",
        "2",
        cache=cache,
        cwd=tmp_path,
        stdin="A dog runs.\n",
    )
    assert translated.returncode == 0, translated.stderr
    assert len(translated.stdout.splitlines()) == 1


def test_a_model_neither_cached_nor_reachable_is_one_line(tmp_path):
    done = _aiayn(
        "import", "marian", "Helsinki-NLP/opus-mt-xx-yy", "--out", "m", cache=tmp_path, cwd=tmp_path
    )
    assert done.returncode == 2
    fetching, line = done.stderr.strip().splitlines()
    assert fetching.startswith("fetching Helsinki-NLP/opus-mt-xx-yy from the Hugging Face Hub")
    assert "Helsinki-NLP/opus-mt-xx-yy: cannot download it from the Hugging Face Hub" in line
    assert "hf download Helsinki-NLP/opus-mt-xx-yy --local-dir DIR" in line
    assert not (tmp_path / "m").exists()


def test_a_directory_here_is_never_taken_for_a_hub_id(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert is_hub_id("Helsinki-NLP/opus-mt-en-de")
    (tmp_path / "Helsinki-NLP" / "opus-mt-en-de").mkdir(parents=True)
    assert not is_hub_id("Helsinki-NLP/opus-mt-en-de")
    assert not is_hub_id("./models/x") and not is_hub_id("/abs/path") and not is_hub_id("a/b/c")
