"""Commands that write into a place check it before their work, not after: a read-only model
directory for ``aiayn calibrate`` and ``aiayn shortlist``, a file where ``aiayn distill
--out`` wants a directory; and ``aiayn calibrate`` refuses too few lines before translating
them. Each is one line, exit status 2."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from aiayn.cli import main
from aiayn.eval.calibration_fit import MIN_LINES, CalibrationError, calibrate


@pytest.fixture
def model_copy(trained_model_dir, tmp_path) -> Path:
    copy = tmp_path / "model"
    shutil.copytree(trained_model_dir, copy)
    return copy


def _read_only(monkeypatch, directory: Path) -> None:
    """``directory`` as a read-only one looks (``os.access``; root writes anywhere)."""
    real = os.access

    def access(path, mode, *args, **kwargs):
        if Path(path).absolute() == directory.absolute() and mode & os.W_OK:
            return False
        return real(path, mode, *args, **kwargs)

    monkeypatch.setattr(os, "access", access)


def _lines(path: Path, n: int) -> Path:
    path.write_text("".join(f"the dog {i} runs\n" for i in range(n)), encoding="utf-8")
    return path


def test_calibrate_on_a_read_only_model_is_one_line_before_translating(
    model_copy, tmp_path, monkeypatch, capsys
):
    _read_only(monkeypatch, model_copy)
    monkeypatch.setattr("aiayn.translate.translator.Translator.translate", _never)
    src, ref = _lines(tmp_path / "s", MIN_LINES), _lines(tmp_path / "r", MIN_LINES)
    assert main(["calibrate", str(model_copy), "--src", str(src), "--ref", str(ref)]) == 2
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert "not writable (calibration.json cannot be written there)" in line


def test_shortlist_on_a_read_only_model_is_one_line(model_copy, tmp_path, monkeypatch, capsys):
    _read_only(monkeypatch, model_copy)
    src, tgt = _lines(tmp_path / "s", 5), _lines(tmp_path / "t", 5)
    argv = ["shortlist", str(model_copy), "--source", str(src), "--target", str(tgt)]
    assert main(argv) == 2
    assert "not writable (shortlist.safetensors" in capsys.readouterr().err


def test_distill_into_a_file_is_one_line(trained_model_dir, tmp_path, capsys):
    out = tmp_path / "taken"
    out.write_text("mine\n")
    source = _lines(tmp_path / "s", 5)
    assert main(["distill", str(trained_model_dir), str(source), "--out", str(out)]) == 2
    assert "exists and is not a directory" in capsys.readouterr().err
    assert out.read_text() == "mine\n"


def test_calibrate_refuses_too_few_lines_before_translating():
    with pytest.raises(CalibrationError, match=f"needs at least {MIN_LINES}"):
        calibrate(_never, ["a"] * (MIN_LINES - 1), ["b"] * (MIN_LINES - 1))


def _never(*args, **kwargs):
    raise AssertionError("translated before the check")
