"""Every code block of the README and the documentation runs as written (``blocks.py`` says
which are run and how a block is marked not to be)."""

from __future__ import annotations

import contextlib
import io
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from ..conftest import data_dir
from .blocks import REPO, blocks, documents

RUNNABLE = [d for d in documents() if any(b.runs for b in blocks(d))]
PORT = re.compile(r"(?<=:)5000\b|(?<=--port )5000\b")
CORPUS = re.compile(r"\$\{AIAYN_DATA_DIR:-[^}]*\}/(\w+)")  # a block's corpus under the data dir


@pytest.fixture
def workdir(trained_model_dir, tmp_path) -> Path:
    """What a reader has after ``bash scripts/run.sh``: a translator at the recipe's path
    (a fresh directory for each document)."""
    root = tmp_path
    model = root / "runs" / "multi30k_en_de_tiny" / "model"
    shutil.copytree(trained_model_dir, model)
    info = json.loads((model / "tokenizer.json").read_text())
    (model / "tokenizer.json").write_text(json.dumps({**info, "src_lang": "en", "tgt_lang": "de"}))
    # scripts/run.sh's recipe (raw cased text) and the tokenised recipe write here
    (root / "runs" / "multi30k_en_de_tiny_raw").symlink_to(model.parent)
    (root / "configs").symlink_to(REPO / "configs")
    return root


def _env() -> dict[str, str]:
    path = os.pathsep.join(p for p in (str(REPO / "src"), os.environ.get("PYTHONPATH")) if p)
    return {
        **os.environ,
        "PYTHONPATH": path,
        "AIAYN_DATA_DIR": str(data_dir()),
        "OMP_NUM_THREADS": "1",
        "PATH": os.pathsep.join([str(Path(sys.executable).parent), os.environ["PATH"]]),
    }


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _wait_for(url: str, proc: subprocess.Popen, where: str) -> None:
    deadline = time.monotonic() + 60
    while True:
        assert proc.poll() is None, f"{where}: the background block ended: {proc.stderr.read()}"
        with contextlib.suppress(OSError), urllib.request.urlopen(url, timeout=1) as answer:
            if answer.status == 200:
                return
        assert time.monotonic() < deadline, f"{where}: nothing answered {url}"
        time.sleep(0.2)


def _run_python(code: str, cwd: Path, where: str) -> None:
    previous = Path.cwd()
    os.chdir(cwd)
    try:
        with contextlib.redirect_stdout(io.StringIO()):
            exec(compile(code, where, "exec"), {"__name__": "__main__"})
    finally:
        os.chdir(previous)


def test_the_documents_have_runnable_blocks():
    assert REPO / "README.md" in RUNNABLE
    for document in documents():
        for block in blocks(document):
            assert block.mark != "skip" or block.why, f"{block}: say why it is not run"
            assert block.mark != "background" or block.lang == "bash", f"{block}"


@pytest.mark.parametrize("document", RUNNABLE, ids=lambda d: str(d.relative_to(REPO)))
def test_code_blocks_run(document, workdir):
    for block in blocks(document):
        for corpus in CORPUS.findall(block.code) if block.runs else ():
            if not (data_dir() / corpus).is_dir():
                pytest.skip(f"{block} reads {data_dir() / corpus}, not found (set AIAYN_DATA_DIR)")
    port = _free_port()
    background: list[subprocess.Popen] = []
    try:
        for block in blocks(document):
            if not block.runs:
                continue
            code = PORT.sub(str(port), block.code)
            if block.lang == "python":
                _run_python(code, workdir, str(block))
            elif block.mark == "background":
                proc = subprocess.Popen(
                    ["bash", "-c", f"exec {code.strip()}"],
                    cwd=workdir,
                    env=_env(),
                    stderr=subprocess.PIPE,
                    text=True,
                    start_new_session=True,
                )
                background.append(proc)
                _wait_for(f"http://127.0.0.1:{port}/health", proc, str(block))
            else:
                done = subprocess.run(
                    ["bash", "-eu", "-c", code],  # as a shell runs it: `zcat F | head` is fine
                    cwd=workdir,
                    env=_env(),
                    capture_output=True,
                    text=True,
                    timeout=300,
                )
                assert done.returncode == 0, f"{block}:\n{done.stdout}\n{done.stderr}"
    finally:
        for proc in background:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGTERM)
            proc.communicate(timeout=60)
