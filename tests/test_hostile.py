"""Hostile input to the surfaces beside the command line: the Python API, ``import marian``
and writes that meet a full or read-only disk. Every case must end in one clear error (an
``AiaynError`` or a ``TypeError`` naming the argument), never a raw exception from deep
inside, a silent wrong answer, or lost data. Command-line cases live in
``tests/test_bad_input.py``; the server's in ``tests/serve/``.

Each parametrised case is (name, the call, expected words).
"""

from __future__ import annotations

import contextlib
import errno
import json
import math
import os
import pickle
import shutil
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
import torch

from aiayn.config import ModelConfig
from aiayn.decode.generate import generate
from aiayn.errors import AiaynError
from aiayn.models import build_model
from aiayn.translate.translator import SearchOptions, Translator

# -- the Python API ----------------------------------------------------------------------


@pytest.fixture(scope="module")
def translator(trained_model_dir) -> Translator:
    return Translator.from_dir(trained_model_dir)


@pytest.fixture(scope="module")
def language_model():
    cfg = ModelConfig(
        src_vocab_size=0,
        tgt_vocab_size=40,
        d_model=32,
        n_heads=4,
        d_ff=64,
        n_encoder_layers=0,
        n_decoder_layers=1,
        dropout=0.0,
    )
    return build_model(cfg).eval()


API_CASES: list[tuple[str, Callable, str]] = [
    ("translate one string", lambda t, lm: t.translate("a dog runs ."), "not one string"),
    ("translate [None]", lambda t, lm: t.translate([None]), "line 1: expected text"),
    ("translate [b'bytes']", lambda t, lm: t.translate(["ok", b"x"]), "line 2"),
    ("translate a dict", lambda t, lm: t.translate({"q": "x"}), "list of lines"),
    ("a lone surrogate", lambda t, lm: t.translate(["ok", "a \ud800 b"]), "line 2: a lone"),
    (
        "1,600 nested <b> as HTML",
        lambda t, lm: t.translate(
            ["<b>" * 1600 + "x" + "</b>" * 1600], SearchOptions(format="html")
        ),
        "line 1: HTML nested deeper than",
    ),
    (
        "HTML as raw text",
        lambda t, lm: t.translate(["<b>x</b>"], SearchOptions(text="raw", format="html")),
        "needs text natural",
    ),
    ("from_dir(None)", lambda t, lm: Translator.from_dir(None), "a model directory is a path"),
    ("from_dir(123)", lambda t, lm: Translator.from_dir(123), "got int"),
    (
        "device cuda:7 on this machine",
        lambda t, lm: Translator.from_dir("runs/x", device="cuda:7"),
        "cuda:7",
    ),
    ("options as a dict", lambda t, lm: t.translate(["x"], {"beam": 2}), "SearchOptions"),
    ("ids out of vocabulary", lambda t, lm: t.translate_ids([[3, 99_999]]), "99999"),
    ("negative id", lambda t, lm: t.translate_ids([[-1]]), "-1"),
    ("ids as a string", lambda t, lm: t.translate_ids(["abc"]), "source 1"),
    ("beam='5'", lambda t, lm: SearchOptions(beam="5"), "beam"),
    ("beam=5000", lambda t, lm: SearchOptions(beam=5000), "from 1 to 1024"),
    ("beam=True", lambda t, lm: SearchOptions(beam=True), "beam"),
    ("beam > vocab/2", lambda t, lm: t.translate(["x"], SearchOptions(beam=40)), "too large"),
    ("alpha=nan", lambda t, lm: SearchOptions(alpha=math.nan), "alpha"),
    ("alpha=inf", lambda t, lm: SearchOptions(alpha=math.inf), "alpha"),
    ("alpha=-1", lambda t, lm: SearchOptions(alpha=-1.0), "alpha"),
    ("max_len_b=-5", lambda t, lm: SearchOptions(max_len_b=-5), "max_len_b"),
    ("max_src_len=1", lambda t, lm: SearchOptions(max_src_len=1), "max_src_len"),
    ("batch_tokens=0", lambda t, lm: SearchOptions(batch_tokens=0), "batch_tokens"),
    ("nbest > beam", lambda t, lm: SearchOptions(beam=2, nbest=3), "larger than beam"),
    ("on_long='explode'", lambda t, lm: SearchOptions(on_long="explode"), "on_long"),
    ("precision='fp8'", lambda t, lm: SearchOptions(precision="fp8"), "precision"),
    ("stopping='soon'", lambda t, lm: SearchOptions(stopping="soon"), "stopping"),
    (
        "float tensor into the model",
        lambda t, lm: t.model.encode(torch.rand(1, 4)),
        "integer tensor",
    ),
    (
        "generate max_new_tokens=-1",
        lambda t, lm: generate(lm, [1], max_new_tokens=-1),
        "at least 0",
    ),
    ("generate max_new_tokens='3'", lambda t, lm: generate(lm, [1], max_new_tokens="3"), "whole"),
    ("generate prompt id 99", lambda t, lm: generate(lm, [99], max_new_tokens=1), "99"),
    ("generate top_p=0", lambda t, lm: generate(lm, [1], max_new_tokens=1, top_p=0.0), "top_p"),
    (
        "generate temperature=nan",
        lambda t, lm: generate(lm, [1], max_new_tokens=1, temperature=math.nan),
        "temperature",
    ),
]


@pytest.mark.parametrize(
    ("call", "words"), [c[1:] for c in API_CASES], ids=[c[0] for c in API_CASES]
)
def test_the_api_refuses_bad_arguments_in_one_line(translator, language_model, call, words):
    with pytest.raises((AiaynError, TypeError)) as caught:
        call(translator, language_model)
    message = str(caught.value)
    assert words in message and "\n" not in message, message


def test_html_alternatives_are_whole_documents_with_scores(translator):
    """``--format html --nbest 3`` (the server's ``alternatives``): three documents, each
    with the segments' k-th translations in place and their mean score."""
    options = SearchOptions(beam=4, nbest=3, format="html")
    [found] = translator.translate(["<p>the dog <b>runs</b></p><p>a cat</p>"], options)
    assert len(found) == 3
    assert all(t.text.startswith("<p>") and t.text.count("<p>") == 2 for t in found)
    assert all(t.score < 0 for t in found) and len({t.text for t in found}) > 1


def test_good_calls_still_work_after_the_checks(translator, language_model):
    [[one]] = translator.translate(["the dog runs"], SearchOptions(beam=2, alpha=0.0))
    assert one.text and one.tokens
    ids = translator.src_tokenizer.encode(["the dog runs"])
    assert translator.translate_ids([torch.tensor(ids[0])], SearchOptions(beam=1))[0][0].text
    assert len(generate(language_model, [1, 2], max_new_tokens=3, temperature=0.0)) == 3


def test_weights_without_a_checksum_are_loaded_with_a_warning(trained_model_dir, tmp_path, caplog):
    """A config.json without its weights record (aiayn 0.1's, or one edited) still loads,
    but never silently: the weights are not verified, and the log says so."""
    model = tmp_path / "m"
    shutil.copytree(trained_model_dir, model)
    config = json.loads((model / "config.json").read_text())
    del config["weights"]
    (model / "config.json").write_text(json.dumps(config))
    with caplog.at_level("WARNING", logger="aiayn"):
        Translator.from_dir(model)
    assert "records no checksum" in caplog.text and "not verified" in caplog.text


def test_weights_that_overflow_are_refused_when_loaded(trained_model_dir, tmp_path):
    """Finite weights so large that the model computes infinities translated every line to
    unknown words (a line of ⁇, exit 0): refused when loaded, naming the directory."""
    from safetensors.torch import load_file, save_file

    from aiayn.store.model_dir import file_checksum

    model = tmp_path / "m"
    shutil.copytree(trained_model_dir, model)
    weights = load_file(model / "model.safetensors")
    weights = {k: v * 1e30 if v.is_floating_point() else v for k, v in weights.items()}
    save_file(weights, model / "model.safetensors")
    config = json.loads((model / "config.json").read_text())  # changed on purpose
    config["weights"].update(file_checksum(model / "model.safetensors"))
    (model / "config.json").write_text(json.dumps(config))
    with pytest.raises(AiaynError, match="computes non-finite values") as caught:
        Translator.from_dir(model)
    assert str(model) in str(caught.value) and "\n" not in str(caught.value)


# -- import marian: a directory from elsewhere trusts nothing -------------------------------


@pytest.fixture(scope="module")
def hf_dir(tmp_path_factory) -> Path:
    pytest.importorskip("transformers", reason="transformers is a dev dependency")
    from .interop.test_marian import _marian_dir

    root = tmp_path_factory.mktemp("hostile-marian") / "hf"
    _marian_dir(root)
    return root


def _edit_config(**changes) -> Callable[[Path], None]:
    def edit(hf: Path) -> None:
        config = json.loads((hf / "config.json").read_text())
        (hf / "config.json").write_text(json.dumps({**config, **changes}))

    return edit


def _edit_vocab(change: Callable[[dict], None]) -> Callable[[Path], None]:
    def edit(hf: Path) -> None:
        vocab = json.loads((hf / "vocab.json").read_text())
        change(vocab)
        (hf / "vocab.json").write_text(json.dumps(vocab))

    return edit


def _bin(content: bytes | Callable[[Path], None]) -> Callable[[Path], None]:
    """Weights as ``pytorch_model.bin`` only (``content``: its bytes, or a writer)."""

    def edit(hf: Path) -> None:
        (hf / "model.safetensors").unlink()
        if callable(content):
            content(hf / "pytorch_model.bin")
        else:
            (hf / "pytorch_model.bin").write_bytes(content)

    return edit


class _Payload:
    """A pickle that would run a command when unpickled without ``weights_only``."""

    def __init__(self, marker: Path):
        self.marker = marker

    def __reduce__(self):
        return (os.system, (f"touch {self.marker}",))


def _pickle_with_code(path: Path) -> None:
    path.write_bytes(pickle.dumps({"model.shared.weight": _Payload(path.parent / "RAN")}))


def _nan_weight(hf: Path) -> None:
    from safetensors.torch import load_file, save_file

    state = load_file(str(hf / "model.safetensors"))
    name = sorted(k for k in state if k.endswith("fc1.weight"))[0]
    state[name][0, 0] = float("nan")
    save_file(state, str(hf / "model.safetensors"))


def _duplicate_id(vocab: dict) -> None:
    vocab["a-second-piece"] = vocab["<unk>"]


MARIAN_CASES: list[tuple[str, Callable[[Path], None], str]] = [
    ("garbage pytorch_model.bin", _bin(b"\x00garbage" * 50), "pytorch_model.bin: not a weights"),
    ("pickle with code", _bin(_pickle_with_code), "pytorch_model.bin: not a weights"),
    ("a list, not a state dict", _bin(lambda p: torch.save([1, 2], p)), "not a state dict"),
    ("no weights at all", lambda hf: (hf / "model.safetensors").unlink(), "no model.safetensors"),
    ("vocab_size = 'abc'", _edit_config(vocab_size="abc"), "vocab_size must be a whole number"),
    ("vocab_size = 2.5", _edit_config(vocab_size=2.5), "vocab_size"),
    ("d_model disagrees with the weights", _edit_config(d_model=64), "d_model 64"),
    ("vocab_size disagrees with the weights", _edit_config(vocab_size=400), "vocab_size 400"),
    ("dropout = 'x'", _edit_config(dropout="x"), "dropout"),
    ("pad_token_id = -1", _edit_config(pad_token_id=-1), "pad_token_id"),
    ("eos_token_id outside", _edit_config(eos_token_id=10_000), "eos_token_id"),
    ("two pieces on one id", _edit_vocab(_duplicate_id), "both have id"),
    ("id -3", _edit_vocab(lambda v: v.update({"x-neg": -3})), "id -3"),
    ("id 99,999", _edit_vocab(lambda v: v.update({"x-big": 99_999})), "vocab.json: piece 'x-big'"),
    ("id 'abc'", _edit_vocab(lambda v: v.update({"x-str": "abc"})), "not a number"),
    ("a NaN weight", _nan_weight, "non-finite"),
]


@pytest.mark.parametrize(
    ("damage", "words"), [c[1:] for c in MARIAN_CASES], ids=[c[0] for c in MARIAN_CASES]
)
def test_import_marian_refuses_damaged_input_in_one_line(hf_dir, tmp_path, damage, words):
    from aiayn.interop.marian import MarianImportError, import_marian

    hf = tmp_path / "hf"
    shutil.copytree(hf_dir, hf)
    damage(hf)
    with pytest.raises(MarianImportError) as caught:
        import_marian(hf, tmp_path / "out")
    message = str(caught.value)
    assert words in message and "\n" not in message, message
    assert not (tmp_path / "out").exists()
    assert not (hf / "RAN").exists()  # no pickled code ran


# -- writes on a full or read-only disk ------------------------------------------------------


def test_export_on_a_full_disk_keeps_the_old_model(trained_model_dir, tmp_path, monkeypatch):
    pytest.importorskip("ctranslate2", reason="ctranslate2 is a dev dependency")
    from aiayn.files import DestinationError
    from aiayn.interop import ct2

    out = tmp_path / "ct2"
    ct2.export_ct2(trained_model_dir, out)
    before = {p.name: p.read_bytes() for p in out.iterdir()}
    real = ct2.convert

    def full_disk(model, src, tgt, out_dir, **kw):
        real(model, src, tgt, out_dir, **kw)
        with open(Path(out_dir) / "model.bin", "r+b") as f:
            f.truncate(100)  # what was written before the disk filled
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(ct2, "convert", full_disk)
    with pytest.raises(DestinationError, match="the disk is full; nothing was changed"):
        ct2.export_ct2(trained_model_dir, out, overwrite=True)
    assert {p.name: p.read_bytes() for p in out.iterdir()} == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ct2"]  # no temporary left


def _cli_with_file_size_limit(argv: list[str], limit: int) -> subprocess.CompletedProcess:
    """``aiayn ARGV`` in a child process whose files may not grow past ``limit`` bytes
    (RLIMIT_FSIZE, SIGXFSZ ignored: a write past it fails as on a full disk)."""
    code = (
        "import resource, signal, sys; signal.signal(signal.SIGXFSZ, signal.SIG_IGN);"
        f"resource.setrlimit(resource.RLIMIT_FSIZE, ({limit}, {limit}));"
        "from aiayn.cli import main; sys.exit(main(sys.argv[1:]))"
    )
    return subprocess.run(
        [sys.executable, "-c", code, *argv],
        capture_output=True,
        text=True,
        env={**os.environ, "OMP_NUM_THREADS": "1"},
        timeout=300,
    )


def test_export_under_a_file_size_limit_is_one_line(trained_model_dir, tmp_path):
    """A real short write (RLIMIT_FSIZE in a child process: the kernel's EFBIG, the closest
    safe stand-in for a full disk) through the command line."""
    pytest.importorskip("ctranslate2", reason="ctranslate2 is a dev dependency")
    argv = ["export", "ct2", str(trained_model_dir), "--out", str(tmp_path / "ct2")]
    done = _cli_with_file_size_limit(argv, 20000)
    assert done.returncode == 2, done.stderr
    [line] = done.stderr.strip().splitlines()
    assert "cannot write" in line and "size limit" in line, line
    assert list(tmp_path.iterdir()) == []  # nothing partial


def test_export_onto_a_read_only_file_system_is_one_line(trained_model_dir, tmp_path, monkeypatch):
    pytest.importorskip("ctranslate2", reason="ctranslate2 is a dev dependency")
    from aiayn.files import DestinationError
    from aiayn.interop.ct2 import export_ct2

    real = Path.mkdir

    def read_only(self, *args, **kwargs):
        if self.parent == tmp_path:
            raise OSError(errno.EROFS, os.strerror(errno.EROFS), str(self))
        return real(self, *args, **kwargs)

    monkeypatch.setattr(Path, "mkdir", read_only)
    with pytest.raises(DestinationError, match="not allowed to write there"):
        export_ct2(trained_model_dir, tmp_path / "ct2")
    assert list(tmp_path.iterdir()) == []


# -- exports and averages never take what is not theirs -----------------------------------


def _forge_marker(directory: Path, names: list[str]) -> None:
    """Edit an export's marker to claim ``names`` as its own, as a user (or a script) might."""
    marker = directory / "aiayn-export.json"
    data = json.loads(marker.read_text())
    data["files"] = {**data["files"], **dict.fromkeys(names, "0" * 64)}
    marker.write_text(json.dumps(data))


def test_a_forged_hf_marker_never_gets_a_users_file_deleted(trained_model_dir, tmp_path, capsys):
    pytest.importorskip("transformers", reason="transformers is a dev dependency")
    from aiayn.cli import main

    out = tmp_path / "hf"
    argv = ["export", "hf", str(trained_model_dir), "--out", str(out), "--overwrite"]
    assert main(argv) == 0
    (out / "thesis.txt").write_text("precious")
    _forge_marker(out, ["thesis.txt"])
    for listed_as_is in (False, True):  # a name with a made-up hash; the old list form
        if listed_as_is:
            marker = json.loads((out / "aiayn-export.json").read_text())
            marker["files"] = sorted(marker["files"])
            (out / "aiayn-export.json").write_text(json.dumps(marker))
        capsys.readouterr()
        assert main(argv) == 2
        [line] = capsys.readouterr().err.strip().splitlines()
        assert "left alone" in line, line
        assert (out / "thesis.txt").read_text() == "precious"


def test_an_edited_export_file_keeps_the_export_from_being_replaced(trained_model_dir, tmp_path):
    """A file of the export that a user changed since is theirs now: its hash no longer
    matches the marker."""
    pytest.importorskip("transformers", reason="transformers is a dev dependency")
    from aiayn.files import DestinationError
    from aiayn.interop.hf import export_hf

    out = export_hf(trained_model_dir, tmp_path / "hf")
    export_hf(trained_model_dir, out, overwrite=True)  # untouched: replaced
    (out / "README.md").write_text("my own notes")
    with pytest.raises(DestinationError, match="left alone"):
        export_hf(trained_model_dir, out, overwrite=True)
    assert (out / "README.md").read_text() == "my own notes"


def test_a_forged_argos_package_is_never_replaced(trained_model_dir, tmp_path):
    """A zip that carries an aiayn marker but also a file the marker does not prove it wrote
    (a user's package with a copied marker) is left alone."""
    pytest.importorskip("ctranslate2", reason="ctranslate2 is a dev dependency")
    pytest.importorskip("onnx", reason="onnx is a dev dependency")
    import zipfile

    from aiayn.interop.argos import export_argos, is_argos_export

    out = export_argos(trained_model_dir, tmp_path / "p.argosmodel", from_code="en", to_code="de")
    assert is_argos_export(out)
    forged = tmp_path / "mine.argosmodel"
    with zipfile.ZipFile(out) as z, zipfile.ZipFile(forged, "w") as w:
        marker = next(n for n in z.namelist() if n.endswith("/aiayn-export.json"))
        top = marker.split("/")[0]
        w.writestr(marker, z.read(marker))
        w.writestr(f"{top}/thesis.txt", "precious")
    assert not is_argos_export(forged)
    from aiayn.files import DestinationError

    with pytest.raises(DestinationError, match="left alone"):
        export_argos(trained_model_dir, forged, from_code="en", to_code="de", overwrite=True)
    with zipfile.ZipFile(forged) as z:
        assert z.read(f"{top}/thesis.txt") == b"precious"


def test_average_over_an_existing_model_needs_overwrite(trained_model_dir, tmp_path, capsys):
    from aiayn.cli import main

    out = tmp_path / "avg"
    argv = ["average", str(trained_model_dir), "--out", str(out)]
    assert main(argv) == 0
    before = {p.name: p.read_bytes() for p in out.iterdir()}
    capsys.readouterr()
    assert main(argv) == 2
    [line] = capsys.readouterr().err.strip().splitlines()
    assert "--overwrite" in line, line
    assert {p.name: p.read_bytes() for p in out.iterdir()} == before
    assert main([*argv, "--overwrite"]) == 0


# -- aiayn data: servers that never answer, destinations that cannot be written ------------


@contextlib.contextmanager
def _bad_server(kind: str) -> Iterator[str]:
    """A local HTTP server that accepts and never answers (``silent``), or answers a byte at
    a time (``trickle``); its URL."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen()
    stop = threading.Event()

    def serve() -> None:
        listener.settimeout(0.1)
        held = []
        while not stop.is_set():
            try:
                connection, _ = listener.accept()
            except TimeoutError:
                continue
            held.append(connection)
            if kind == "trickle":
                connection.recv(65536)
                connection.sendall(b"HTTP/1.0 200 OK\r\nContent-Length: 1000000\r\n\r\n")
                while not stop.wait(0.05):
                    with contextlib.suppress(OSError):
                        connection.sendall(b"x")
        for connection in held:
            connection.close()

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{listener.getsockname()[1]}"
    finally:
        stop.set()
        thread.join()
        listener.close()


@pytest.mark.parametrize(
    ("kind", "words"), [("silent", "no answer within"), ("trickle", "not done within")]
)
def test_data_from_a_server_that_stalls_is_one_line_in_bounded_time(
    tmp_path, capsys, monkeypatch, kind, words
):
    from aiayn.cli import main
    from aiayn.data import download, testsets

    monkeypatch.setattr(download, "STALL_S", 1.0)
    monkeypatch.setattr(testsets, "DOWNLOAD_S", 1.0)
    with _bad_server(kind) as url:
        started = time.monotonic()
        argv = ["data", "flores200", "--dest", str(tmp_path / "ts"), "--langs", "de"]
        assert main([*argv, "--mirror", url]) == 2
    assert time.monotonic() - started < 10
    [line] = [x for x in capsys.readouterr().err.splitlines() if "error" in x]
    assert words in line and url in line, line
    assert [p for p in tmp_path.rglob("*") if p.is_file()] == []  # nothing partial


def test_data_into_a_file_or_a_read_only_place_is_one_line(tmp_path, capsys, monkeypatch):
    from aiayn.cli import main

    (tmp_path / "file.txt").write_text("mine")
    mirror = "file:///no/such/mirror"
    argv = ["data", "flores200", "--langs", "de", "--mirror", mirror, "--dest"]
    assert main([*argv, str(tmp_path / "file.txt")]) == 2
    [line] = capsys.readouterr().err.strip().splitlines()
    assert "not a directory" in line, line
    assert (tmp_path / "file.txt").read_text() == "mine"
    real = Path.mkdir

    def read_only(self, *args, **kwargs):
        if tmp_path in self.parents or self == tmp_path / "ro":
            raise OSError(errno.EROFS, os.strerror(errno.EROFS), str(self))
        return real(self, *args, **kwargs)

    monkeypatch.setattr(Path, "mkdir", read_only)
    assert main([*argv, str(tmp_path / "ro" / "ts")]) == 2
    [line] = capsys.readouterr().err.strip().splitlines()
    assert "not allowed to write there" in line, line


# -- prepare: what it reads, how it writes --------------------------------------------------


def test_a_pipe_and_a_bom_are_read_as_text(tmp_path):
    import gzip
    import threading

    from aiayn.data import read_lines

    (tmp_path / "bom.txt").write_bytes("\ufeffein hund\nzwei\n".encode())
    assert list(read_lines(tmp_path / "bom.txt")) == ["ein hund", "zwei"]
    r, w = os.pipe()
    payload = gzip.compress(b"one\ntwo\n")
    writer = threading.Thread(target=lambda: (os.write(w, payload), os.close(w)))
    writer.start()
    try:
        assert list(read_lines(f"/dev/fd/{r}")) == ["one", "two"]  # <(zcat ...) is such a path
    finally:
        writer.join()
        os.close(r)


def _prepare(tmp_path, name: str, **fields):
    from aiayn.config import PrepareConfig
    from aiayn.data import load_prepared, prepare

    from .data.corpora import make_corpus

    paths = make_corpus(tmp_path / "corpus", train=120)
    cfg = PrepareConfig(
        src_lang="src",
        tgt_lang="tgt",
        train=paths["train"],
        valid=paths["valid"],
        vocab_size=60,
        **fields,
    )
    prepare(cfg, tmp_path / name)
    return load_prepared(tmp_path / name)


def test_shard_size_is_honoured_to_the_pair(tmp_path):
    whole = _prepare(tmp_path, "whole")
    sharded = _prepare(tmp_path, "sharded", shard_size=7)
    shards = sharded.manifest["splits"]["train"]["shards"]
    assert len(shards) == -(-120 // 7) == 18
    a, b = whole.split("train"), sharded.split("train")
    assert len(a) == len(b) == 120
    for i in range(len(a)):
        assert a.src[i].tolist() == b.src[i].tolist() and a.tgt[i].tolist() == b.tgt[i].tolist()


def test_prepare_refuses_an_empty_validation_set(tmp_path):
    from aiayn.config import PrepareConfig
    from aiayn.data import prepare
    from aiayn.data.corpus import CorpusError

    from .data.corpora import make_corpus, write_lines

    paths = make_corpus(tmp_path / "corpus", train=120)
    write_lines(tmp_path / "empty.src", [])
    write_lines(tmp_path / "empty.tgt", [])
    cfg = PrepareConfig(
        src_lang="src",
        tgt_lang="tgt",
        train=paths["train"],
        valid=tmp_path / "empty",
        vocab_size=60,
    )
    with pytest.raises(CorpusError, match="the valid split is empty"):
        prepare(cfg, tmp_path / "d")
    assert not (tmp_path / "d").exists()


def test_a_killed_encoding_worker_is_one_line(tmp_path, monkeypatch):
    from aiayn.data import encode

    from .data.corpora import sentences

    data = _prepare(tmp_path, "d")
    model = data.directory / data.manifest["vocab"]["files"]["src"]
    monkeypatch.setattr(encode, "CHUNK", 10)
    monkeypatch.setattr(encode, "POOL_FROM_CHUNK", 0)
    keep = encode.Filter(max_len=100, max_len_ratio=10.0, active=False)
    with encode.ChunkEncoder(model, model, workers=2) as encoder:

        def pairs():
            for i, s in enumerate(sentences(200)):
                if i == 60:  # the pool is running: kill its workers
                    for process in list(encoder._pool._processes.values()):
                        process.kill()
                yield s, s

        with pytest.raises(encode.WorkerDied, match="worker process died"):
            for _ in encoder.encode(pairs(), keep):
                pass


def test_prepare_on_a_full_disk_is_one_line(tmp_path):
    """A real short write (RLIMIT_FSIZE in a child process, SIGXFSZ ignored: the write fails
    as on a full disk), through the command line: one line, no partial dataset."""
    from .data.corpora import make_corpus

    paths = make_corpus(tmp_path / "corpus", train=3000)
    argv = ["prepare", "--src-lang", "src", "--tgt-lang", "tgt", "--vocab-size", "60"]
    argv += ["--train", paths["train"], "--valid", paths["valid"], "--out", str(tmp_path / "d")]
    done = _cli_with_file_size_limit(argv, 8000)
    assert done.returncode == 2, done.stderr
    last = done.stderr.strip().splitlines()[-1]
    assert "Traceback" not in done.stderr and "cannot write" in last, done.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["corpus"]


def test_a_rank_that_stops_answering_is_one_line(tmp_path):
    """What a collective raises when another torchrun rank hung or died becomes one line
    naming the time-out (the hang itself: run.dist_timeout_minutes)."""
    import torch.distributed as dist

    from aiayn.runtime import DistributedTimeout, distributed_failure

    gloo_timeout = RuntimeError("[../gloo/transport/tcp/pair.cc:534] Timed out waiting 3000ms")
    assert distributed_failure(gloo_timeout, timeout_minutes=0.05) is None  # no group yet
    store = dist.FileStore(str(tmp_path / "store"), 1)
    dist.init_process_group("gloo", store=store, rank=0, world_size=1)
    try:
        failure = distributed_failure(gloo_timeout, timeout_minutes=0.05)
        assert isinstance(failure, DistributedTimeout)
        assert "0.05-minute" in str(failure) and "\n" not in str(failure)
        assert distributed_failure(RuntimeError("shape mismatch"), timeout_minutes=1) is None
    finally:
        dist.destroy_process_group()
