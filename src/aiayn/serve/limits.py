"""How much of a request the server reads: bodies are refused by size before they are read
into memory (by their ``Content-Length`` at once, else by counting as they stream in), and an
upload is read in bounded chunks.

A body is held to ``body_limit(settings)`` bytes: ``--char-limit`` characters of text take at
most 6 bytes each in JSON (``\\uXXXX``), and a list of short texts adds its quotes and commas;
a multipart upload (``/translate_file``) to ``upload_limit(settings)``: ``--max-file-mb`` and
room for the form's other fields.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from fastapi import UploadFile
from fastapi.responses import JSONResponse

from aiayn.serve.service import ApiError
from aiayn.serve.settings import ServeSettings

BODY_FLOOR = 64 * 2**10  # bytes any JSON or form body may have, whatever --char-limit
CHUNK = 64 * 2**10  # bytes an upload is read by


def body_limit(settings: ServeSettings) -> int:
    """The most bytes a JSON or form body may have."""
    return max(BODY_FLOOR, 16 * settings.char_limit)


def upload_limit(settings: ServeSettings) -> int:
    """The most bytes a multipart body (a file and the form's other fields) may have."""
    return settings.max_file_bytes + body_limit(settings)


class BodyLimit:
    """ASGI middleware: a body over its limit is answered 413, in the API's error shape,
    without being read (``Content-Length``) or as soon as its streamed bytes pass it (the
    route reading it gets the ``ApiError``)."""

    def __init__(
        self,
        app,
        *,
        limit: int,
        upload_limit: int,
        error_body: Callable[[int, str, str | None], dict[str, Any]],
    ):
        self.app = app
        self.limit = limit
        self.upload_limit = upload_limit
        self.error_body = error_body

    async def __call__(self, scope, receive, send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = dict(scope.get("headers") or [])
        kind = headers.get(b"content-type", b"").decode("latin-1").lower()
        limit = self.upload_limit if kind.startswith("multipart/") else self.limit
        length = headers.get(b"content-length", b"").decode("latin-1").strip()
        if length.isdigit() and int(length) > limit:
            message = f"Request body too large: {int(length):,} bytes, the limit is {limit:,}"
            response = JSONResponse(
                self.error_body(413, message, "body_too_large"),
                status_code=413,
                headers={"connection": "close"},
            )
            await response(scope, receive, send)
            return
        received = 0

        async def counted():
            nonlocal received
            message = await receive()
            if message["type"] == "http.request":
                received += len(message.get("body", b""))
                if received > limit:
                    raise ApiError(
                        413,
                        f"Request body too large: over {limit:,} bytes",
                        code="body_too_large",
                    )
            return message

        await self.app(scope, counted, send)


async def read_upload(upload: UploadFile, max_bytes: int) -> bytes | None:
    """The uploaded file's bytes, read ``CHUNK`` at a time; None once it has more than
    ``max_bytes`` (nothing more is read)."""
    chunks, size = [], 0
    while chunk := await upload.read(min(CHUNK, max_bytes + 1 - size)):
        chunks.append(chunk)
        size += len(chunk)
        if size > max_bytes:
            return None
    return b"".join(chunks)
