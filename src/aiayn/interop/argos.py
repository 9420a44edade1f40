"""``aiayn export argos``: an aiayn translation model as an Argos Translate package, the
format LibreTranslate installs.

A ``.argosmodel`` file is a zip of one directory holding ``metadata.json`` (languages and
versions), ``model/`` (the model in CTranslate2's format, as ``aiayn export ct2`` writes
it), ``sentencepiece.model`` (Argos cuts the source text and joins the output pieces with
it), ``minisbd/LANG.onnx`` (a sentence splitter, so that nothing is downloaded at run time:
``aiayn.interop.splitter``, or a trained MiniSBD model given with ``splitter``) and
``README.md`` (the model card, when the model directory has one).

Argos uses one SentencePiece model for both sides: a model with two different ones is
refused. Needs ``pip install ctranslate2 onnx``.
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
import shutil
import tempfile
import zipfile
from functools import partial
from pathlib import Path

from aiayn.data.tokenizer_files import TokenizerInfo, read_tokenizer_info
from aiayn.files import DestinationError, disk_refusals_in_one_line, remove_stale_temporaries
from aiayn.interop.ct2 import export_ct2
from aiayn.interop.destination import (
    MARKER_FILE,
    ExportError,
    copy_model_card,
    holds_what_it_wrote,
    write_marker,
)
from aiayn.interop.splitter import write_splitter
from aiayn.store import read_model_config

SUFFIX = ".argosmodel"
ARGOS_VERSION = "1.9"  # the package format's version (Argos Translate >= 1.9 reads it)
SPM_FILE = "sentencepiece.model"
LANGUAGE_CODE = re.compile(r"[a-z]{2,3}(-[A-Za-z0-9]{2,8})*")
VERSION = re.compile(r"[0-9A-Za-z][0-9A-Za-z.+-]{0,63}")  # it names the package's directory


def export_argos(
    model_dir: str | Path,
    out_file: str | Path,
    *,
    from_code: str | None = None,
    to_code: str | None = None,
    splitter: str | Path | None = None,
    quantization: str | None = None,
    version: str = "1.0",
    overwrite: bool = False,
) -> Path:
    """Write ``model_dir`` (an aiayn translation model directory) to ``out_file`` as an
    Argos Translate package.

    Args:
        from_code, to_code: the languages' ISO 639 codes (default: those the model names).
        splitter: a MiniSBD ``.onnx`` sentence splitter to ship (default: a rule-based one).
        quantization: the CTranslate2 model's weight type (default float32).
        version: the package's version.

    Raises:
        ExportError: a missing package, a model Argos cannot use, languages not named.
        DestinationError: ``out_file`` exists and is not a package aiayn wrote.
    """
    for package in ("ctranslate2", "onnx"):
        if importlib.util.find_spec(package) is None:
            raise ExportError(f"{package} is not installed (pip install {package})")
    if not isinstance(version, str) or not VERSION.fullmatch(version):
        raise ExportError(
            f"--version {version!r}: a package version is digits, letters, dots and dashes, "
            "starting with a digit or a letter (e.g. 1.0)"
        )
    out = Path(out_file)
    check_package_destination(out, overwrite=overwrite)
    model_dir = Path(model_dir)
    if not read_model_config(model_dir).is_encoder_decoder:
        raise ExportError(f"{model_dir}: a language model; an Argos package is a translator")
    info = read_tokenizer_info(model_dir)
    spm_file = _one_sentencepiece_model(model_dir, info)
    src = _language(from_code or info.src_lang, "--from", model_dir)
    tgt = _language(to_code or info.tgt_lang, "--to", model_dir)
    if splitter is not None and not Path(splitter).is_file():
        raise ExportError(f"{splitter}: no such sentence splitter file")
    name = f"translate-{src}_{tgt}-{version.replace('.', '_')}"
    metadata = package_metadata(src, tgt, version)
    with disk_refusals_in_one_line(out):
        out.parent.mkdir(parents=True, exist_ok=True)
        remove_stale_temporaries(out)
        with tempfile.TemporaryDirectory(
            dir=out.parent, prefix=f".{out.name}.tmp-{os.getpid()}-"
        ) as tmp:
            package = Path(tmp) / name
            package.mkdir()
            export_ct2(model_dir, package / "model", quantization=quantization)
            shutil.copyfile(spm_file, package / SPM_FILE)
            (package / "minisbd").mkdir()
            if splitter is not None:
                shutil.copyfile(splitter, package / "minisbd" / f"{src}.onnx")
            else:
                write_splitter(package / "minisbd" / f"{src}.onnx", src)
            (package / "metadata.json").write_text(json.dumps(metadata, indent=2) + "\n")
            copy_model_card(model_dir, package)
            write_marker(package, "argos", model_dir)
            archive = Path(tmp) / "package.zip"
            _zip(package, archive)
            os.replace(archive, out)
    return out


def check_package_destination(out: Path, *, overwrite: bool) -> None:
    """Refuse an ``out`` that is not a ``.argosmodel`` path, or that exists and is not a
    package aiayn wrote (or is one, without ``overwrite``)."""
    if out.suffix != SUFFIX:
        raise DestinationError(f"{out}: an Argos package's name ends in {SUFFIX}")
    if not (out.exists() or out.is_symlink()):
        return
    if not out.is_file() or out.is_symlink() or not is_argos_export(out):
        raise DestinationError(
            f"{out}: exists and is not an Argos package aiayn wrote; it is left alone "
            "(choose another path, or remove it yourself)"
        )
    if not overwrite:
        raise DestinationError(
            f"{out}: an Argos package exists there (pass --overwrite to replace it)"
        )


def is_argos_export(path: Path) -> bool:
    """Whether ``path`` is a package aiayn wrote: its one directory holds aiayn's marker,
    and every file in the archive is one the marker lists, with its SHA-256."""
    try:
        with zipfile.ZipFile(path) as z:
            members = [m for m in z.infolist() if not m.is_dir()]
            markers = [
                m.filename
                for m in members
                if m.filename.count("/") == 1 and m.filename.endswith("/" + MARKER_FILE)
            ]
            if len(markers) != 1:
                return False
            top = markers[0].split("/")[0] + "/"
            if any(not m.filename.startswith(top) for m in members):
                return False
            files = [
                (m.filename[len(top) :], partial(z.open, m))
                for m in members
                if m.filename != markers[0]
            ]
            marker = z.read(markers[0]).decode("utf-8")
            return holds_what_it_wrote("argos", marker, files)
    except (OSError, zipfile.BadZipFile, UnicodeDecodeError):
        return False


def package_metadata(src: str, tgt: str, version: str) -> dict:
    """``metadata.json`` of a translation package."""
    return {
        "package_version": version,
        "argos_version": ARGOS_VERSION,
        "from_code": src,
        "from_name": language_name(src),
        "to_code": tgt,
        "to_name": language_name(tgt),
        "type": "translate",
        "links": [],
    }


def language_name(code: str) -> str:
    """The English name of a language code (Babel's CLDR data), or the code itself."""
    from babel import Locale, UnknownLocaleError

    try:
        return Locale.parse(code.replace("-", "_")).get_display_name("en") or code
    except (UnknownLocaleError, ValueError):
        return code


def _language(code: str, option: str, model_dir: Path) -> str:
    if not code:
        raise ExportError(f"{model_dir}: the model does not name its languages; pass {option}")
    if not LANGUAGE_CODE.fullmatch(code):
        raise ExportError(f"{option} {code!r}: not a language code (ISO 639, e.g. en, de, pt-BR)")
    return code


def _one_sentencepiece_model(model_dir: Path, info: TokenizerInfo) -> Path:
    """The one SentencePiece model of both sides, as Argos needs it."""
    if info.kind == "char":
        raise ExportError(f"{model_dir}: a character tokenizer; Argos needs a SentencePiece model")
    if info.sha256.get(info.src_file) != info.sha256.get(info.tgt_file):
        raise ExportError(
            f"{model_dir}: separate source and target SentencePiece models; an Argos package "
            f"holds one {SPM_FILE} (prepare with joint_vocab = true)"
        )
    return model_dir / info.src_file


def _zip(directory: Path, archive: Path) -> None:
    """Zip ``directory`` as the one top-level directory of ``archive``."""
    with zipfile.ZipFile(archive, "w", zipfile.ZIP_DEFLATED) as z:
        for path in sorted(directory.rglob("*")):
            z.write(path, path.relative_to(directory.parent).as_posix())
