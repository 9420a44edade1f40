"""``/translate_file``'s documents and ``/download_file``'s translated files.

A document (``aiayn.text.documents``: .docx, .pptx, .odt, .odp, .epub, .html, .srt, .vtt,
.md, and the localisation files) is read and written in a process of its own, under a
memory and a time limit (``aiayn.workers.document_process``), its texts translated by the
served model in one request; a document over the server's bounds (``--max-file-mb``,
``--max-file-parts``, ``--max-file-texts``) or its process's is answered 413, a broken or
hostile one 400, each in one line.
Translated files are written only inside the server's own temporary folder, under random
names that no request chooses, and are deleted after ``--file-expiry`` seconds, when more
than ``KEPT_FILES`` are kept, and when the server stops.
"""

from __future__ import annotations

import asyncio
import contextlib
import re
import shutil
import tempfile
import threading
import time
import uuid
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path

from aiayn.serve.checks import BadRequest
from aiayn.serve.service import ApiError
from aiayn.serve.settings import ServeSettings
from aiayn.text.documents import (
    FORMATS,
    DocumentError,
    DocumentTooLarge,
    Limits,
    Translated,
    for_each,
    format_for,
)
from aiayn.workers.document_process import DocumentProcesses

FILE_FORMATS = (".txt", *(s for f in FORMATS.values() for s in f.suffixes))
KEPT_FILES = 256  # translated files kept for /download_file at most
_NAME = re.compile(r"^[0-9a-f]{32}\.[A-Za-z0-9._-]{1,100}$")


class TranslatedFiles:
    """Translated files in a temporary folder of their own, each under ``<random>.<name>``,
    for ``expire_s`` seconds (the ``keep`` latest at most)."""

    def __init__(self, *, expire_s: float, keep: int = KEPT_FILES):
        self.folder = Path(tempfile.mkdtemp(prefix="aiayn-serve-files-"))
        self.expire_s = expire_s
        self.keep = keep
        self._added: OrderedDict[str, float] = OrderedDict()  # name -> when
        self._lock = threading.Lock()

    def add(self, filename: str, content: bytes) -> str:
        """Keep ``content``; the name to download it by."""
        safe = re.sub(r"[^A-Za-z0-9._-]", "_", filename)[-100:].lstrip(".") or "file"
        name = f"{uuid.uuid4().hex}.{safe}"
        (self.folder / name).write_bytes(content)
        with self._lock:
            self._added[name] = time.monotonic()
            self._forget(len(self._added) - self.keep)
        return name

    def get(self, name: str) -> bytes | None:
        """A kept file's bytes; None for a name never given, expired or dropped."""
        with self._lock:
            self._forget(0)
            if not _NAME.match(name) or name not in self._added:
                return None
        try:
            return (self.folder / name).read_bytes()
        except FileNotFoundError:
            return None

    def close(self) -> None:
        shutil.rmtree(self.folder, ignore_errors=True)

    def _forget(self, surplus: int) -> None:
        """Drop the ``surplus`` oldest files, and every expired one (lock held)."""
        now = time.monotonic()
        while self._added:
            name, added = next(iter(self._added.items()))
            if surplus <= 0 and now - added < self.expire_s:
                return
            del self._added[name]
            (self.folder / name).unlink(missing_ok=True)
            surplus -= 1


def document_format(filename: str) -> str | None:
    """The document format of an upload; None for a text file.

    Raises:
        ApiError: 400 for a suffix no format has.
    """
    if Path(filename).suffix.lower() == ".txt":
        return None
    found = format_for(filename)
    if found is None:
        raise ApiError(
            400, f"Invalid request: file format not supported ({', '.join(FILE_FORMATS)})"
        )
    return found.name


def limits(settings: ServeSettings) -> Limits:
    """The document bounds ``settings`` set."""
    return Limits(
        max_bytes=settings.max_file_bytes,
        max_parts=settings.max_file_parts,
        max_segments=settings.max_file_texts,
    )


def media_type(name: str) -> str:
    found = format_for(name)
    return found.media_type if found else "text/plain; charset=utf-8"


async def translate_document_file(
    data: bytes | None,
    format: str,
    filename: str,
    settings: ServeSettings,
    translate: Callable[[list[str]], Awaitable[list[Translated]]],
    *,
    documents: DocumentProcesses,
    retranslate: bool = False,
    target: str | None = None,
) -> tuple[bytes, str | None]:
    """An uploaded document translated by ``translate`` (its texts, all in one call),
    within the server's bounds and ``--char-limit`` characters of text, read and written in
    one of ``documents``' processes; and its summary line
    (``aiayn.text.documents.translate_document``).

    Raises:
        ApiError: 413 over a bound (``data`` None: more bytes than ``--max-file-mb``; a
            document process's memory or time).
        BadRequest: a broken, hostile or mislabelled document, or too much text.
    """
    if data is None:
        raise ApiError(
            413, f"Invalid request: {filename} is over {settings.max_file_bytes:,} bytes"
        )
    if not data:
        raise BadRequest("Invalid request: empty file")
    async with documents.lent() as process:
        with _as_api_errors():
            texts = await asyncio.to_thread(
                process.read,
                data,
                format,
                what=filename,
                limits=limits(settings),
                retranslate=retranslate,
            )
        size = sum(len(t) for t in texts)
        if size > settings.char_limit:
            raise BadRequest(
                f"Invalid request: request ({size}) exceeds text limit ({settings.char_limit})"
            )
        once = list(dict.fromkeys(texts))  # each distinct text translated once
        found = for_each(texts, once, await translate(once) if once else [])
        with _as_api_errors():
            return await asyncio.to_thread(process.render, found, what=filename, target=target)


@contextlib.contextmanager
def _as_api_errors() -> Iterator[None]:
    """A document over a bound as 413, a broken or hostile one as 400."""
    try:
        yield
    except DocumentTooLarge as e:
        raise ApiError(413, f"Invalid request: {e}") from None
    except DocumentError as e:
        raise BadRequest(f"Invalid request: {e}") from None
