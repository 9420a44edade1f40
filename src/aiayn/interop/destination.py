"""Where exports go: what marks an export as aiayn's (so that ``--overwrite`` replaces it and
nothing else), and the files every export carries along."""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable, Iterable
from functools import partial
from pathlib import Path

from aiayn.errors import AiaynError
from aiayn.files import sha256_file, sha256_stream

MARKER_FILE = "aiayn-export.json"  # in every exported directory: what wrote it, from what
MODEL_CARD = "README.md"
FORMAT = "aiayn-export"


class ExportError(AiaynError):
    """A model that cannot be exported (a language model, a field the target format cannot
    express, a missing package); the message names what."""


def write_marker(directory: Path, target: str, model_dir: str | Path) -> None:
    """Write ``MARKER_FILE`` into a finished export ``directory``: the export's format, the
    model directory it came from, and the path and SHA-256 of every file the export wrote
    there (so that ``--overwrite`` replaces only files that are still exactly what it wrote:
    a marker edited to list a user's file cannot name that file's content)."""
    data = {
        "format": FORMAT,
        "target": target,
        "model": str(Path(model_dir).resolve()),
        "files": {name: sha256_file(directory / name) for name in _files_below(directory)},
    }
    (directory / MARKER_FILE).write_text(json.dumps(data, indent=2) + "\n", encoding="utf-8")


def _files_below(directory: Path) -> list[str]:
    """Relative POSIX paths of the files below ``directory`` (not the marker)."""
    return sorted(
        p.relative_to(directory).as_posix()
        for p in directory.rglob("*")
        if p.is_file() and p != directory / MARKER_FILE
    )


def _marker(target: str, marker: str) -> dict[str, str] | None:
    """The files (path -> SHA-256) that ``marker`` (the text of a ``MARKER_FILE``) lists, if
    it is aiayn's for ``target``."""
    try:
        data = json.loads(marker)
    except ValueError:
        return None
    ours = isinstance(data, dict) and data.get("format") == FORMAT and data.get("target") == target
    files = data.get("files") if ours else None
    if not isinstance(files, dict) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in files.items()
    ):
        return None
    return files


def holds_what_it_wrote(target: str, marker: str, files: Iterable[tuple[str, Callable]]) -> bool:
    """Whether every file in ``files`` ((relative path, opener of its bytes) pairs) is listed
    by ``marker`` with the SHA-256 of its present content: a file a user put there, or one
    that a forged marker names, keeps an export from being replaced."""
    listed = _marker(target, marker)
    if listed is None:
        return False
    for name, opener in files:
        if name not in listed:
            return False
        with opener() as stream:
            if sha256_stream(stream) != listed[name]:
                return False
    return True


def exported_by_aiayn(target: str) -> Callable[[Path], bool]:
    """The ``replaceable`` test of ``files.write_directory`` for a ``target`` export: the
    directory holds aiayn's marker for that target, nothing but regular files, and each of
    them is listed by the marker with its present SHA-256."""

    def replaceable(directory: Path) -> bool:
        try:
            marker = (directory / MARKER_FILE).read_text(encoding="utf-8")
            entries = [p for p in directory.rglob("*") if p != directory / MARKER_FILE]
            if any(p.is_symlink() or not (p.is_file() or p.is_dir()) for p in entries):
                return False
            files = [
                (p.relative_to(directory).as_posix(), partial(open, p, "rb"))
                for p in entries
                if p.is_file()
            ]
            return holds_what_it_wrote(target, marker, files)
        except (OSError, UnicodeDecodeError):
            return False

    return replaceable


def copy_model_card(model_dir: Path, directory: Path) -> None:
    """Copy the model directory's ``README.md`` (its model card), when it has one."""
    card = model_dir / MODEL_CARD
    if card.is_file():
        shutil.copyfile(card, directory / MODEL_CARD)
