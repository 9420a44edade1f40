"""Bad input to ``aiayn export hf`` and ``aiayn export argos`` (beside tests/test_bad_input.py):
every case ends with exit status 2 and one line naming what is wrong, and an ``--out`` that
holds someone else's files is left as it was."""

from __future__ import annotations

import errno

import pytest

pytest.importorskip("transformers", reason="transformers is a dev dependency")
pytest.importorskip("ctranslate2", reason="ctranslate2 is a dev dependency")
pytest.importorskip("onnx", reason="onnx is a dev dependency")

from aiayn.cli import main
from aiayn.config import ModelConfig
from aiayn.models import build_model
from aiayn.store import save_model

from .models import model_dir


def _lm(t):
    cfg = ModelConfig(d_model=16, n_heads=2, d_ff=32, n_encoder_layers=0).with_vocab(0, 40)
    save_model(build_model(cfg), cfg, t / "model")


def _mine(t):
    model_dir(t)
    (t / "mine").mkdir()
    (t / "mine" / "keep.txt").write_text("precious")
    (t / "mine.argosmodel").write_text("precious")


CASES = [  # (name, set-up, argv, expected words)
    ("hf: pre-norm", lambda t: model_dir(t, norm_first=True), ["hf"], "norm_first"),
    ("hf: learned positions", lambda t: model_dir(t, positional="learned"), ["hf"], "positional"),
    ("hf: epsilon", lambda t: model_dir(t, layer_norm_eps=1e-6), ["hf"], "layer_norm_eps"),
    ("hf: language model", _lm, ["hf"], "language model"),
    ("hf: characters", lambda t: model_dir(t, tokenizer="char"), ["hf"], "character tokenizer"),
    ("hf: not a model", lambda t: (t / "model").mkdir(), ["hf"], "config.json"),
    ("hf: someone's directory", _mine, ["hf", "--out", "{t}/mine", "--overwrite"], "left alone"),
    ("hf: out is a file", _mine, ["hf", "--out", "{t}/mine/keep.txt"], "not a"),
    ("argos: language model", _lm, ["argos", "--from", "en", "--to", "de"], "language model"),
    ("argos: suffix", model_dir, ["argos", "--out", "{t}/p.zip"], ".argosmodel"),
    (
        "argos: someone's file",
        _mine,
        ["argos", "--out", "{t}/mine.argosmodel", "--overwrite"],
        "left alone",
    ),
    ("argos: a directory", _mine, ["argos", "--out", "{t}/mine"], ".argosmodel"),
    (
        "argos: two SentencePiece models",
        lambda t: model_dir(t, tokenizer="separate"),
        ["argos"],
        "separate source and target",
    ),
    ("argos: characters", lambda t: model_dir(t, tokenizer="char"), ["argos"], "character"),
    ("argos: no languages", lambda t: model_dir(t, languages=("", "")), ["argos"], "--from"),
    ("argos: bad code", model_dir, ["argos", "--from", "en glish"], "not a language code"),
    ("argos: splitter", model_dir, ["argos", "--splitter", "{t}/none.onnx"], "none.onnx"),
    ("argos: empty version", model_dir, ["argos", "--version", ""], "--version ''"),
    ("argos: version with a slash", model_dir, ["argos", "--version", "1/2"], "--version '1/2'"),
    ("argos: version '..'", model_dir, ["argos", "--version", ".."], "a package version is"),
]


@pytest.mark.parametrize(
    ("setup", "argv", "words"), [c[1:] for c in CASES], ids=[c[0] for c in CASES]
)
def test_bad_export_gets_one_clear_line(tmp_path, capsys, setup, argv, words):
    setup(tmp_path)
    target, *options = argv
    if "--out" not in options:
        options += ["--out", f"{{t}}/out{'.argosmodel' if target == 'argos' else ''}"]
    options = [o.replace("{t}", str(tmp_path)) for o in options]
    assert main(["export", target, str(tmp_path / "model"), *options]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "error:" in err[0] and words in err[0], err
    if (tmp_path / "mine").exists():
        assert (tmp_path / "mine" / "keep.txt").read_text() == "precious"
        assert (tmp_path / "mine.argosmodel").read_text() == "precious"
        assert sorted(p.name for p in (tmp_path / "mine").iterdir()) == ["keep.txt"]


@pytest.mark.parametrize(
    ("target", "where", "out"),
    [
        ("hf", "aiayn.interop.hf._write_tokenizer", "hf"),
        ("argos", "aiayn.interop.argos._zip", "p.argosmodel"),
    ],
)
def test_a_full_disk_gets_one_line_and_leaves_nothing(
    tmp_path, capsys, monkeypatch, target, where, out
):
    model_dir(tmp_path)

    def full(*args, **kwargs):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(where, full)
    assert main(["export", target, str(tmp_path / "model"), "--out", str(tmp_path / out)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "the disk is full" in err[0], err
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(["model", "spm.model"])


def test_overwrite_keeps_an_export_that_a_user_has_added_files_to(tmp_path, capsys):
    """An aiayn export is replaced by ``--overwrite`` only while it holds just what the export
    wrote: a file put there since is never deleted."""
    model_dir(tmp_path)
    out = tmp_path / "hf"
    argv = ["export", "hf", str(tmp_path / "model"), "--out", str(out), "--overwrite"]
    assert main(argv) == 0
    assert main(argv) == 0  # its own export: replaced
    (out / "notes.txt").write_text("precious")
    before = sorted(p.name for p in out.iterdir())
    capsys.readouterr()
    assert main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "left alone" in err[0], err
    assert sorted(p.name for p in out.iterdir()) == before
    assert (out / "notes.txt").read_text() == "precious"
