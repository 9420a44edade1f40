"""Every code block of the README and the documentation runs as written, as a user runs it:
each document in a fresh scratch directory outside the repository that holds only what a
clone gives (``configs/``) and what the document's own earlier blocks made: no model made
beforehand, no corpus unless a block fetches it (``aiayn data``, ``aiayn pipeline``, which
read ``$AIAYN_DATA_DIR``, here the local copies, instead of downloading). ``blocks.py`` says
which blocks are run and how a block is marked not to be."""

from __future__ import annotations

import contextlib
import hashlib
import io
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
from filelock import FileLock

from ..conftest import data_dir
from .blocks import REPO, Block, blocks, documents, shown_in

RUNNABLE = [d for d in documents() if any(b.runs for b in blocks(d))]
PORT = re.compile(r"(?<=:)5000\b|(?<=--port )5000\b")
CLONE = ("configs",)  # what the scratch directory holds of a clone
UNFETCHED = re.compile(r"AIAYN_DATA_DIR|shared/data")  # corpora a user does not have


@pytest.fixture
def workdir(tmp_path) -> Path:
    """A fresh scratch directory, outside the repository, holding what a clone gives."""
    root = tmp_path / "scratch"
    root.mkdir()
    for name in CLONE:
        (root / name).symlink_to(REPO / name)
    return root


@pytest.fixture(scope="session")
def once_cache(tmp_path_factory) -> Path:
    """Where a ``once`` block's files are kept for the other documents that start with it
    (one place for all of pytest-xdist's workers: the parent of their base directories)."""
    base = tmp_path_factory.getbasetemp()
    root = (base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base) / "docs-once"
    root.mkdir(exist_ok=True)
    return root


def _env() -> dict[str, str]:
    path = os.pathsep.join(p for p in (str(REPO / "src"), os.environ.get("PYTHONPATH")) if p)
    return {
        **os.environ,
        "PYTHONPATH": path,
        "AIAYN_DATA_DIR": str(data_dir()),  # the local copies `aiayn data` would download
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


def _run_python(code: str, cwd: Path, where: str) -> str:
    """What the block prints."""
    previous, printed = Path.cwd(), io.StringIO()
    os.chdir(cwd)
    try:
        with contextlib.redirect_stdout(printed):
            exec(compile(code, where, "exec"), {"__name__": "__main__"})
    finally:
        os.chdir(previous)
    return printed.getvalue()


def _run_bash(code: str, cwd: Path, where: str) -> str:
    """What the block prints, standard output then standard error."""
    done = subprocess.run(
        ["bash", "-eu", "-c", code],  # as a shell runs it: `zcat F | head` is fine
        cwd=cwd,
        env=_env(),
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, f"{where}:\n{done.stdout}\n{done.stderr}"
    return done.stdout + done.stderr


def _run_once(block: Block, workdir: Path, cache: Path) -> None:
    """Run ``block`` (its document's first) in the fresh ``workdir``, or, where another
    document started with the same block, copy in the files it made there."""
    made = cache / hashlib.sha256(block.code.encode()).hexdigest()[:16]
    with FileLock(f"{made}.lock"):
        if not (made / "done").is_file():
            _run_bash(block.code, workdir, str(block))
            shutil.rmtree(made, ignore_errors=True)
            shutil.copytree(workdir, made / "files", symlinks=True, ignore=lambda d, n: CLONE)
            (made / "done").write_text(str(block))
            return
    shutil.copytree(made / "files", workdir, symlinks=True, dirs_exist_ok=True)


def shown_outputs(document: Path) -> dict[int, Block]:
    """The output blocks of ``document``, by the line of the runnable block each shows."""
    found, previous = {}, None
    for block in blocks(document):
        if block.mark == "output":
            assert previous is not None and previous.runs, f"{block}: follows no run block"
            assert previous.mark not in ("once", "background"), f"{block}: after {previous.mark}"
            found[previous.line] = block
        previous = block
    return found


def test_the_documents_have_runnable_blocks():
    assert REPO / "README.md" in RUNNABLE
    for document in documents():
        runnable = [b for b in blocks(document) if b.runs]
        for block in blocks(document):
            assert block.mark != "skip" or block.why, f"{block}: say why it is not run"
            assert block.mark not in ("background", "once") or block.lang == "bash", f"{block}"
            assert block.mark != "once" or block == runnable[0], f"{block}: once, not first"
        for block in runnable:
            assert not UNFETCHED.search(block.code), f"{block}: fetch the corpus (aiayn data)"
        shown_outputs(document)  # each follows a block that runs


def test_an_output_block_matches_what_is_printed_numbers_aside():
    printed = "loaded in 3.2s\nBLEU = 12.34 (n=1,000)\nwritten: out.de\n"
    assert shown_in("loaded in 1.0s\n...\nwritten: out.de\n", printed) is None
    assert shown_in("BLEU = 40.1 (n=29,000)", printed) is None
    assert shown_in("written: out.fr", printed) == "written: out.fr"
    assert shown_in("written: out.de\nloaded in 3.2s", printed) == "loaded in 3.2s"  # order


def _case(document: Path):
    """A document with shell blocks is slow (each command is a process that loads PyTorch).
    The documents that start with the same ``once`` block are one xdist group: one worker
    runs them in turn, the first making what the block makes and the others copying it,
    instead of a second worker waiting on the first's lock."""
    runnable = [b for b in blocks(document) if b.runs]
    marks = [pytest.mark.slow] if any(b.lang == "bash" for b in runnable) else []
    if runnable[0].mark == "once":
        digest = hashlib.sha256(runnable[0].code.encode()).hexdigest()[:16]
        marks.append(pytest.mark.xdist_group(f"docs-once-{digest}"))
    return pytest.param(document, marks=marks)


@pytest.mark.parametrize(
    "document", [_case(d) for d in RUNNABLE], ids=lambda d: str(d.relative_to(REPO))
)
def test_code_blocks_run(document, workdir, once_cache):
    if not (data_dir() / "multi30k").is_dir():
        pytest.skip(f"no local copy of the corpora at {data_dir()} (set AIAYN_DATA_DIR)")
    port = _free_port()
    background: list[subprocess.Popen] = []
    output_of = shown_outputs(document)
    try:
        for block in blocks(document):
            if not block.runs:
                continue
            printed = ""
            code = PORT.sub(str(port), block.code)
            if block.mark == "once":
                _run_once(block, workdir, once_cache)
            elif block.lang == "python":
                printed = _run_python(code, workdir, str(block))
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
                printed = _run_bash(code, workdir, str(block))
            if keep := os.environ.get("AIAYN_DOCS_PRINTED"):  # to write output blocks from
                name = f"{block.document.relative_to(REPO)}:{block.line}".replace("/", "_")
                Path(keep, name + ".txt").write_text(printed, encoding="utf-8")
            if shown := output_of.get(block.line):
                missing = shown_in(shown.code, printed)
                assert missing is None, f"{shown}: not printed by {block}: {missing!r}\n{printed}"
    finally:
        for proc in background:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGTERM)
            proc.communicate(timeout=60)
