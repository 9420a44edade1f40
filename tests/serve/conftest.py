"""What the server tests share: a real ``aiayn serve`` process, the test translator with
language codes, and what offline translation gives."""

from __future__ import annotations

import atexit
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

httpx = pytest.importorskip("httpx", reason="the serve extra is a dev dependency")
pytest.importorskip("fastapi", reason="the serve extra is a dev dependency")

from aiayn.translate.translator import SearchOptions, Translator  # noqa: E402

from ..conftest import built_once  # noqa: E402
from ..train.conftest import write_toml  # noqa: E402

ENV = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONUNBUFFERED": "1"}
SENTENCES = ["the dog runs", "a big red ball near the tree", "cat sleeps on the house ."]


def wait_until_healthy(proc: subprocess.Popen, url: str, seconds: float = 180) -> None:
    """Wait for ``url``/health to answer 200 (a loaded 2-core machine starts slowly), failing
    with the server's stderr if it ends first."""
    deadline = time.monotonic() + seconds
    while True:
        assert proc.poll() is None, proc.stderr.read()
        try:
            if httpx.get(url + "/health", timeout=1).status_code == 200:
                return
        except httpx.TransportError:
            pass
        assert time.monotonic() < deadline, "the server did not start"
        time.sleep(0.1)


def end_server(proc: subprocess.Popen, seconds: float = 30) -> None:
    """End a server whatever state it is in (still loading, stuck, already gone): SIGTERM,
    and SIGKILL once ``seconds`` have passed; its decoding processes end with it
    (test_server.py's test_decoding_processes_end_with_a_killed_server)."""
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
    try:
        proc.wait(timeout=seconds)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def start_server(argv: list[str]) -> subprocess.Popen:
    """``aiayn serve`` with ``argv`` in a process of its own, its standard error piped, ended
    by ``end_server`` when the test process exits if nothing ended it before (a test that
    failed half-way leaves no server behind)."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "aiayn", "serve", *argv], env=ENV, stderr=subprocess.PIPE, text=True
    )
    atexit.register(end_server, proc, 5)
    return proc


class Server:
    """``aiayn serve`` in its own process, on a free port of 127.0.0.1."""

    def __init__(self, model: Path, *options: str):
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            self.port = s.getsockname()[1]
        self.url = f"http://127.0.0.1:{self.port}"
        self.proc = start_server(["--model", str(model), "--port", str(self.port), *options])
        try:
            wait_until_healthy(self.proc, self.url)
        except BaseException:  # it never answered: end it here, not at exit
            end_server(self.proc)
            raise

    def stop(self) -> str:
        """SIGTERM; the server must end cleanly (uvicorn re-raises the signal once done) after
        saying what it answered (and, when it started, that it was loading, and in how long).
        Its standard error."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        try:
            _, err = self.proc.communicate(timeout=60)
        except subprocess.TimeoutExpired:
            end_server(self.proc, 0)
            raise
        assert self.proc.returncode in (0, -signal.SIGTERM), err
        assert "stopped: answered" in err, err
        loading = err.index("decoding process(es) each")  # the loading steps, in order
        assert loading < err.index("loaded in ") < err.index("serving "), err
        return err


@pytest.fixture(scope="module")
def en_de(trained_model_dir, tmp_path_factory) -> Path:
    """The trained test translator, its languages named en and de (what clients expect)."""
    model = tmp_path_factory.mktemp("serve") / "en-de"
    shutil.copytree(trained_model_dir, model)
    info = json.loads((model / "tokenizer.json").read_text())
    (model / "tokenizer.json").write_text(json.dumps({**info, "src_lang": "en", "tgt_lang": "de"}))
    return model


@pytest.fixture(scope="module")
def fr_de(en_de, tmp_path_factory) -> Path:
    """A second translator, fr -> de: the test translator with its weights perturbed, so
    that the two translate the same text differently."""
    import torch
    from safetensors.torch import load_file, save_file

    from aiayn.store.model_dir import file_checksum

    model = tmp_path_factory.mktemp("serve") / "fr-de"
    shutil.copytree(en_de, model)
    info = json.loads((model / "tokenizer.json").read_text())
    (model / "tokenizer.json").write_text(json.dumps({**info, "src_lang": "fr"}))
    weights = load_file(model / "model.safetensors")
    noise = torch.Generator().manual_seed(0)
    weights = {k: v + 0.3 * torch.randn(v.shape, generator=noise) for k, v in weights.items()}
    save_file(weights, model / "model.safetensors")
    config = json.loads((model / "config.json").read_text())  # weights changed on purpose
    config["weights"].update(file_checksum(model / "model.safetensors"))
    (model / "config.json").write_text(json.dumps(config))
    return model


@pytest.fixture(scope="module")
def server(en_de):
    s = Server(en_de)
    yield s
    s.stop()


def expected_translations(model: Path, texts, **options) -> list[str]:
    translator = Translator.from_dir(model)
    return [h[0].text for h in translator.translate(texts, SearchOptions(**options))]


def children(pid: int) -> list[int]:
    """The processes whose parent is ``pid``."""
    found = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[1]) == pid:
            found.append(int(stat.parent.name))
    return found


LM_TEXT = "to be, or not to be, that is the question.\n" * 40
LM = {
    "task": "lm",
    "model": {"d_model": 32, "n_heads": 4, "d_ff": 64, "n_encoder_layers": 0},
    "data": {"block_size": 16, "batch_size": 8},
    "run": {"max_updates": 60, "save_every": 60, "valid_every": 60},
}


@pytest.fixture(scope="session")
def lm_dir(tmp_path_factory) -> Path:
    """A tiny language model (trained once per run for every worker)."""
    from aiayn.cli import main
    from aiayn.data.lm_stream import prepare_lm

    def train(root: Path) -> None:
        root.mkdir()
        (root / "text.txt").write_text(LM_TEXT)
        prepare_lm(root / "text.txt", root / "data")
        config = {
            **LM,
            "data": {**LM["data"], "dir": str(root / "data")},
            "run": {**LM["run"], "dir": str(root / "run")},
        }
        assert main(["train", str(write_toml(root / "lm.toml", config))]) == 0

    return built_once(tmp_path_factory, "lm", (LM_TEXT, LM), train) / "run" / "best"
