"""Writing and checking files: directories that appear whole or not at all (the one way aiayn
writes a dataset, a model directory or a checkpoint), and checksums.

``write_directory(dest)`` hands out an empty temporary directory beside ``dest`` and, when
the work succeeds, renames it to ``dest``; an interrupted or failed write leaves ``dest`` as
it was. Temporary names carry the writer's process id, so the next write to the same
place removes those of writers that no longer run (a killed ``prepare``, a crash while
saving). Files and directories get the umask's permissions.

Imports nothing from torch or aiayn beyond ``errors``.
"""

from __future__ import annotations

import errno
import fnmatch
import hashlib
import itertools
import os
import shutil
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import BinaryIO

from aiayn.errors import AiaynError

_counter = itertools.count()


class DestinationError(AiaynError):
    """An output path that aiayn will not write to (it holds something aiayn did not write)."""


@contextmanager
def write_directory(
    dest: str | Path,
    *,
    replace: bool = False,
    replaceable: Callable[[Path], bool] = lambda _: False,
    what: str = "directory",
    error: type[AiaynError] = DestinationError,
    kept: str = "nothing was changed there",
) -> Iterator[Path]:
    """Yield an empty temporary directory that becomes ``dest`` when the block succeeds.

    What was at ``dest`` before stays as it was, and no partial directory is left: the new
    one is written beside it and swapped in only once complete.

    Args:
        dest: the directory to create.
        replace: an existing ``dest`` may be replaced (only if ``replaceable`` says so).
        replaceable: whether an existing ``dest`` is something this writer may replace
            (e.g. a dataset aiayn wrote); anything else is refused.
        what: what ``dest`` is, for error messages.
        error, kept: how a write the disk refused is raised (``disk_refusals_in_one_line``).

    Raises:
        DestinationError: ``dest`` exists and may not be replaced.
        error: the disk refused the write.
    """
    dest = Path(dest)
    check_destination(dest, replace=replace, replaceable=replaceable, what=what)
    with disk_refusals_in_one_line(dest, error=error, kept=kept):
        dest.parent.mkdir(parents=True, exist_ok=True)
        remove_stale_temporaries(dest)
        tmp = dest.parent / f".{dest.name}.tmp-{os.getpid()}-{next(_counter)}"
        tmp.mkdir()
        try:
            yield tmp
            _apply_umask(tmp)
            _swap_into_place(tmp, dest)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)


@contextmanager
def disk_refusals_in_one_line(
    dest: str | Path,
    *,
    error: type[AiaynError] = DestinationError,
    kept: str = "nothing was changed there",
) -> Iterator[None]:
    """Raise a write in the block that the disk refused (``write_failure``: full, read-only,
    over the size limit) as ``error("cannot write DEST: REASON; KEPT")``; any other
    exception as it is."""
    try:
        yield
    except Exception as e:
        reason = write_failure(e)
        if reason is None:
            raise
        raise error(f"cannot write {dest}: {reason}; {kept}") from None


def holds_only(patterns: Iterable[str], *, required: str) -> Callable[[Path], bool]:
    """A ``replaceable`` test: a directory holding ``required`` and nothing but files whose
    names match ``patterns`` (shell patterns), i.e. only what a writer of that kind writes."""
    patterns = tuple(patterns)

    def test(path: Path) -> bool:
        if not (path / required).is_file():
            return False
        return all(
            p.is_file() and not p.is_symlink() and any(fnmatch.fnmatch(p.name, x) for x in patterns)
            for p in path.iterdir()
        )

    return test


def foreign_entries(path: Path, patterns: Iterable[str]) -> list[str]:
    """Names in ``path`` that no pattern matches (what a writer would not have written)."""
    patterns = tuple(patterns)
    return sorted(
        p.name for p in path.iterdir() if not any(fnmatch.fnmatch(p.name, x) for x in patterns)
    )


def write_failure(error: Exception) -> str | None:
    """What went wrong in a failed write, in words, if it was the disk (full, or another
    I/O error); None for errors that are not about writing."""
    text = str(error)
    code = getattr(error, "errno", None)
    if code in (errno.ENOSPC, errno.EDQUOT) or "No space left" in text:
        return "the disk is full"
    if code == errno.EFBIG or "File too large" in text:
        return "a file grew over the size limit (RLIMIT_FSIZE or the file system's)"
    if code in (errno.EROFS, errno.EACCES, errno.EPERM):
        return f"not allowed to write there ({os.strerror(code)})"
    if isinstance(error, OSError) and code is None and "requested and" in text:
        return f"a write was cut short, the disk is probably full ({text[:80]})"  # numpy
    if isinstance(error, OSError) or "I/O error" in text:
        return f"a write failed ({' '.join(text.split())[:120]})"
    return None


def _apply_umask(directory: Path) -> None:
    """Give every file and directory below ``directory`` the permissions the umask allows
    (some writers, safetensors among them, create files readable by their owner only)."""
    mask = os.umask(0)
    os.umask(mask)
    for root, dirs, files in os.walk(directory):
        for name in dirs:
            os.chmod(os.path.join(root, name), 0o777 & ~mask)
        for name in files:
            os.chmod(os.path.join(root, name), 0o666 & ~mask)


def check_destination(
    dest: Path, *, replace: bool, replaceable: Callable[[Path], bool], what: str
) -> None:
    """Raise DestinationError unless ``dest`` is free, or may be replaced; call it before long
    work, so a bad output path fails at once."""
    if not (dest.exists() or dest.is_symlink()):
        return
    if not dest.is_dir() or dest.is_symlink():
        raise DestinationError(f"{dest}: exists and is not a {what}; choose another path")
    if not replaceable(dest):
        if not any(dest.iterdir()):
            return
        raise DestinationError(
            f"{dest}: exists and is not a {what} aiayn wrote; it is left alone "
            "(choose another path, or remove it yourself)"
        )
    if not replace:
        raise DestinationError(f"{dest}: a {what} exists there (pass --overwrite to replace it)")


def check_writable(directory: str | Path, *, what: str, create: bool = False) -> None:
    """Raise DestinationError unless ``what`` can be written into ``directory`` (with
    ``create``: a directory that does not exist yet is made under a writable one); call it
    before long work, so that a read-only or wrong place fails at once, not after it."""
    directory = Path(directory)
    if directory.exists() and not directory.is_dir():
        raise DestinationError(f"{directory}: exists and is not a directory ({what} goes there)")
    if not directory.exists():
        if not create:
            raise DestinationError(f"{directory}: no such directory ({what} goes there)")
        directory = next(p for p in directory.absolute().parents if p.exists())
    if not os.access(directory, os.W_OK | os.X_OK):
        raise DestinationError(f"{directory}: not writable ({what} cannot be written there)")


def write_file(
    dest: str | Path,
    text: str,
    *,
    error: type[AiaynError] = DestinationError,
    kept: str = "nothing was changed there",
) -> None:
    """Write ``text`` (UTF-8) to the file ``dest`` whole or not at all: into a temporary file
    beside it, renamed over it once complete, so a killed writer leaves ``dest`` as it was.

    Raises:
        error: the disk refused the write (``disk_refusals_in_one_line``).
    """
    dest = Path(dest)
    with disk_refusals_in_one_line(dest, error=error, kept=kept):
        dest.parent.mkdir(parents=True, exist_ok=True)
        remove_stale_temporaries(dest)
        tmp = dest.parent / f".{dest.name}.tmp-{os.getpid()}-{next(_counter)}"
        try:
            with open(tmp, "w", encoding="utf-8", newline="\n") as f:
                f.write(text)
            os.replace(tmp, dest)
        finally:
            tmp.unlink(missing_ok=True)


def remove_stale_temporaries(dest: Path) -> list[Path]:
    """Remove the temporary directories (and files: ``write_file``) left beside ``dest`` by
    writers that are gone."""
    removed = []
    if not dest.parent.is_dir():
        return removed
    for path in dest.parent.glob(f".{dest.name}.*-*"):
        kind, _, rest = path.name[len(dest.name) + 2 :].partition("-")
        pid = rest.split("-")[0]
        if kind in ("tmp", "old") and pid.isdigit() and not _running(int(pid)):
            if path.is_dir():
                shutil.rmtree(path, ignore_errors=True)
            else:
                path.unlink(missing_ok=True)
            removed.append(path)
    return removed


def _swap_into_place(new: Path, dest: Path) -> None:
    """Move ``new`` to ``dest``; an existing ``dest`` is removed only after the move."""
    old = None
    if dest.exists():
        old = dest.parent / f".{dest.name}.old-{os.getpid()}-{next(_counter)}"
        os.replace(dest, old)
    os.replace(new, dest)
    if old is not None:
        shutil.rmtree(old, ignore_errors=True)


def _running(pid: int) -> bool:
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def sha256_file(path: str | Path) -> str:
    with open(path, "rb") as f:
        return sha256_stream(f)


def sha256_stream(stream: BinaryIO) -> str:
    """The SHA-256 of what ``stream`` holds from where it is, read 1 MiB at a time."""
    digest = hashlib.sha256()
    for block in iter(lambda: stream.read(1 << 20), b""):
        digest.update(block)
    return digest.hexdigest()
