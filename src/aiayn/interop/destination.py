"""Where exports go: what marks an export as aiayn's (so that ``--overwrite`` replaces it and
nothing else), and the files every export carries along."""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from pathlib import Path

from aiayn.errors import AiaynError
from aiayn.files import DestinationError, write_failure

MARKER_FILE = "aiayn-export.json"  # in every exported directory: what wrote it, from what
MODEL_CARD = "README.md"
FORMAT = "aiayn-export"


class ExportError(AiaynError):
    """A model that cannot be exported (a language model, a field the target format cannot
    express, a missing package); the message names what."""


def marker_json(target: str, model_dir: str | Path) -> str:
    """The content of ``MARKER_FILE``: the export's format and the model directory it came
    from."""
    data = {"format": FORMAT, "target": target, "model": str(Path(model_dir).resolve())}
    return json.dumps(data, indent=2) + "\n"


def is_export(target: str, marker: str) -> bool:
    """Whether ``marker`` (the text of a ``MARKER_FILE``) is aiayn's, for ``target``."""
    try:
        data = json.loads(marker)
    except ValueError:
        return False
    return isinstance(data, dict) and data.get("format") == FORMAT and data.get("target") == target


def exported_by_aiayn(target: str) -> Callable[[Path], bool]:
    """The ``replaceable`` test of ``files.atomic_directory`` for a ``target`` export: the
    directory holds aiayn's marker for that target (and so nothing a user put there)."""

    def replaceable(directory: Path) -> bool:
        try:
            return is_export(target, (directory / MARKER_FILE).read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError):
            return False

    return replaceable


def copy_model_card(model_dir: Path, directory: Path) -> None:
    """Copy the model directory's ``README.md`` (its model card), when it has one."""
    card = model_dir / MODEL_CARD
    if card.is_file():
        shutil.copyfile(card, directory / MODEL_CARD)


def raise_write_failure(error: OSError, out: Path) -> None:
    """Raise a write that the disk refused (full, read-only) as one line; re-raise anything
    else."""
    reason = write_failure(error)
    if reason is None:
        raise error
    raise DestinationError(f"cannot write {out}: {reason}; nothing was changed there") from None
