"""Documents read and written in processes of their own, under a memory and a time limit,
so that a hostile one (a repeat count or an expansion no check foresaw, a library's runaway
parse) ends its process, not the server: the request gets 413 and the server starts another
process.

A ``DocumentProcess`` holds one document at a time: ``read`` sends the bytes and gets its
texts (the document stays in the process), ``render`` sends their translations and gets the
file and its summary line. The process is spawned (the server has threads), imports only
``aiayn.text.documents`` (no torch), caps its address space (``RLIMIT_AS``), and is killed
when an answer takes longer than its time limit. ``DocumentProcesses`` lends a few of them,
each started at its first use and again after it was killed.
"""

from __future__ import annotations

import asyncio
import contextlib
import signal
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass
from multiprocessing.connection import Connection
from typing import Any

from aiayn.text.documents import (
    DocumentError,
    DocumentTooLarge,
    Limits,
    Translated,
    read_document,
    render,
)
from aiayn.workers.children import end_child, spawn_child

LIVENESS_CHECK_S = 0.5  # while waiting for an answer, how often to check the process lives


@dataclass(frozen=True)
class DocumentLimits:
    """What one document process may take: address space, and seconds per read or render."""

    memory_bytes: int = 2 << 30
    seconds: float = 120.0


def _serve(conn: Connection, limits: DocumentLimits) -> None:
    """The document process: answers ``("read", ...)`` with the texts, ``("render", ...)``
    with the file and its summary, until ``None`` or its caller goes away."""
    import resource

    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    resource.setrlimit(resource.RLIMIT_AS, (limits.memory_bytes, limits.memory_bytes))
    document = None
    while True:
        try:
            message = conn.recv()
        except EOFError:
            return
        if message is None:
            return
        try:
            if message[0] == "read":
                document = None
                _, data, format, options = message
                document = read_document(data, format, **options)
                conn.send(("texts", document.texts))
            else:
                _, found, options = message
                lines: list[str] = []
                out = render(document, found, report=lines.append, **options)
                document = None
                conn.send(("file", (out, lines[0] if lines else None)))
        except DocumentTooLarge as e:
            conn.send(("too large", str(e)))
        except DocumentError as e:
            conn.send(("error", str(e)))
        except MemoryError:
            document = None
            conn.send(("too large", f"over the {limits.memory_bytes >> 20:,} MiB it may take"))
        except Exception as e:  # a library's own failure: one line, and the process goes on
            document = None
            conn.send(("error", f"not readable ({type(e).__name__}: {str(e)[:200]})"))


class DocumentProcess:
    """One document process seen from the server (``_serve``)."""

    def __init__(self, limits: DocumentLimits):
        self.limits = limits
        self._conn, self._process = spawn_child(_serve, limits, "aiayn-documents")

    def read(
        self, data: bytes, format: str, *, what: str, limits: Limits, retranslate: bool
    ) -> list[str]:
        """``aiayn.text.documents.read_document`` in the process: the document's texts.

        Raises:
            DocumentError: as ``read_document``.
            DocumentTooLarge: as ``read_document``, or over the process's limits.
        """
        options = {"what": what, "limits": limits, "retranslate": retranslate}
        return self._ask(("read", data, format, options), what)

    def render(
        self, found: Sequence[Translated], *, what: str, target: str | None
    ) -> tuple[bytes, str | None]:
        """``aiayn.text.documents.render`` of the document read last: the file and its
        summary line."""
        found = [Translated(t) if isinstance(t, str) else t for t in found]
        return self._ask(("render", found, {"what": what, "target": target}), what)

    def _ask(self, message: tuple, what: str) -> Any:
        try:
            self._conn.send(message)
            kind, payload = self._answer()
        except (EOFError, OSError, TimeoutError) as e:
            self._restart()
            reason = "took too long" if isinstance(e, TimeoutError) else "ran out of memory"
            raise DocumentTooLarge(f"{what}: reading it {reason} (refused)") from None
        if kind in ("too large", "error"):
            message = payload if payload.startswith(f"{what}:") else f"{what}: {payload}"
            raise (DocumentTooLarge if kind == "too large" else DocumentError)(message)
        return payload

    def _answer(self) -> tuple[str, Any]:
        """The process's answer; EOFError where it ended, TimeoutError past its time."""
        waited = 0.0
        while not self._conn.poll(LIVENESS_CHECK_S):
            waited += LIVENESS_CHECK_S
            if not self._process.is_alive():
                raise EOFError
            if waited >= self.limits.seconds:
                raise TimeoutError
        return self._conn.recv()

    def _restart(self) -> None:
        end_child(self._process, self._conn, 0)
        self._conn, self._process = spawn_child(_serve, self.limits, "aiayn-documents")

    def close(self) -> None:
        with contextlib.suppress(OSError):
            self._conn.send(None)
        end_child(self._process, self._conn, 5)


class DocumentProcesses:
    """Up to ``count`` document processes, each lent to one request at a time."""

    def __init__(self, limits: DocumentLimits = DocumentLimits(), count: int = 2):
        self.limits = limits
        self._free: asyncio.Queue[DocumentProcess | None] = asyncio.Queue()
        for _ in range(count):
            self._free.put_nowait(None)  # started at its first use
        self._started: list[DocumentProcess] = []

    @contextlib.asynccontextmanager
    async def lent(self) -> AsyncIterator[DocumentProcess]:
        """A document process, for one document's read and render."""
        process = await self._free.get()
        try:
            if process is None:
                process = await asyncio.to_thread(DocumentProcess, self.limits)
                self._started.append(process)
            yield process
        finally:
            self._free.put_nowait(process)

    def close(self) -> None:
        for process in self._started:
            process.close()
