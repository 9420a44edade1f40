"""Where exports go: what marks an export as aiayn's (so that ``--overwrite`` replaces it and
nothing else), and the files every export carries along."""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from pathlib import Path

from aiayn.errors import AiaynError

MARKER_FILE = "aiayn-export.json"  # in every exported directory: what wrote it, from what
MODEL_CARD = "README.md"
FORMAT = "aiayn-export"


class ExportError(AiaynError):
    """A model that cannot be exported (a language model, a field the target format cannot
    express, a missing package); the message names what."""


def write_marker(directory: Path, target: str, model_dir: str | Path) -> None:
    """Write ``MARKER_FILE`` into a finished export ``directory``: the export's format, the
    model directory it came from, and the names of everything the export wrote there (so
    that ``--overwrite`` can tell a file a user added later)."""
    data = {
        "format": FORMAT,
        "target": target,
        "model": str(Path(model_dir).resolve()),
        "files": sorted(p.name for p in directory.iterdir() if p.name != MARKER_FILE),
    }
    (directory / MARKER_FILE).write_text(json.dumps(data, indent=2) + "\n", encoding="utf-8")


def _marker(target: str, marker: str) -> dict | None:
    """The parsed ``marker`` (the text of a ``MARKER_FILE``) if it is aiayn's for ``target``."""
    try:
        data = json.loads(marker)
    except ValueError:
        return None
    ours = isinstance(data, dict) and data.get("format") == FORMAT and data.get("target") == target
    return data if ours else None


def is_export(target: str, marker: str) -> bool:
    """Whether ``marker`` (the text of a ``MARKER_FILE``) is aiayn's, for ``target``."""
    return _marker(target, marker) is not None


def exported_by_aiayn(target: str) -> Callable[[Path], bool]:
    """The ``replaceable`` test of ``files.write_directory`` for a ``target`` export: the
    directory holds aiayn's marker for that target and nothing the marker does not list
    (a file a user put there since keeps the directory from being replaced)."""

    def replaceable(directory: Path) -> bool:
        try:
            data = _marker(target, (directory / MARKER_FILE).read_text(encoding="utf-8"))
            names = {p.name for p in directory.iterdir()} - {MARKER_FILE}
        except (OSError, UnicodeDecodeError):
            return False
        files = data.get("files") if data is not None else None
        return isinstance(files, list) and names <= set(files)

    return replaceable


def copy_model_card(model_dir: Path, directory: Path) -> None:
    """Copy the model directory's ``README.md`` (its model card), when it has one."""
    card = model_dir / MODEL_CARD
    if card.is_file():
        shutil.copyfile(card, directory / MODEL_CARD)
