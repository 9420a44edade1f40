"""LibreTranslate's HTTP API for translation models, written from its public documentation:
``POST /translate`` (``q`` a string or a list, ``source`` or ``auto``, ``target``, ``format``
``text`` or ``html``, ``alternatives``), ``POST /translate_file`` (a text file or a document,
multipart, ``aiayn.serve.translated_files``; its translation at ``GET /download_file/...``),
``GET /languages``, ``POST /detect`` (lingua, among the served languages),
``GET /frontend/settings``, ``POST /suggest`` (403 unless the server keeps suggestions);
errors as ``{"error": ...}`` with 400, 403, 404, 413, 429, 500 (and 503 while stopping or on
time-out). Several models, each under its language pair: a request goes to the model of its
source and target (``source: auto``: of the language lingua finds). Also the web page at
``/`` and the attention heatmap it shows.
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Callable
from pathlib import Path
from typing import Any

from fastapi import FastAPI, Request
from fastapi.responses import HTMLResponse, JSONResponse, Response
from starlette.datastructures import UploadFile

from aiayn.serve import checks
from aiayn.serve.checks import BadRequest, visible
from aiayn.serve.libretranslate_requests import answer_fields, requested_options
from aiayn.serve.limits import read_upload
from aiayn.serve.page import PAGE
from aiayn.serve.served import ServedModels, language_name, pair_options
from aiayn.serve.service import ApiError, check_key, request_values
from aiayn.serve.settings import ServeSettings
from aiayn.serve.translated_files import (
    FILE_FORMATS,
    KEPT_FILES,
    document_format,
    media_type,
    translate_document_file,
)
from aiayn.text.documents import Translated
from aiayn.translate.document_texts import document_options, reviewed
from aiayn.translate.translator import SearchOptions

FRONTEND_TIMEOUT_MS = 500  # what LibreTranslate's page waits after typing before it translates
# The attention picture's characters (source and translation together) at most: its memory
# grows with layers x heads x both lengths (2,800 characters once took 4.6 GB and a minute).
ATTENTION_CHAR_LIMIT = 300


class LibreTranslate(ServedModels):
    """LibreTranslate's API over the served translation models."""

    def error_body(self, status: int, message: str, code: str | None) -> dict[str, Any]:
        return {"error": message}

    def install(self, app: FastAPI) -> None:
        """LibreTranslate's routes (``ROUTES``); each finds this service in the app's
        state."""
        for path, endpoint, methods, extra in ROUTES:
            app.add_api_route(path, endpoint, methods=methods, **extra)


def _service(request: Request) -> LibreTranslate:
    return request.app.state.service


async def _checked_values(request: Request) -> dict[str, Any]:
    """The request's parameters, its API key checked."""
    values = await request_values(request)
    check_key(_service(request).settings, values.get("api_key"))
    return values


async def page(request: Request) -> str:
    service = _service(request)
    return PAGE.replace("__PAIRS__", pair_options(service.pairs.values(), service.pivots))


async def languages(request: Request) -> list[dict[str, Any]]:
    return _service(request).languages()


async def detect(request: Request) -> list[Any]:
    service, values = _service(request), await _checked_values(request)
    texts = checks.texts(values, "q", service.settings.char_limit)
    if isinstance(values["q"], list):  # each text on its own
        return [service.detect(text) for text in texts]
    return service.detect("\n".join(texts))


async def frontend_settings(request: Request) -> dict[str, Any]:
    service = _service(request)
    first, settings = service.first, service.settings
    keys = settings.api_keys is not None
    return {
        "charLimit": settings.char_limit,
        "frontendTimeout": FRONTEND_TIMEOUT_MS,
        "apiKeys": keys,
        "keyRequired": keys,
        "suggestions": service.suggestions is not None,
        "filesTranslation": True,
        "supportedFilesFormat": list(FILE_FORMATS),
        "language": {
            "source": {"code": first.source, "name": language_name(first.source)},
            "target": {"code": first.target, "name": language_name(first.target)},
        },
    }


async def suggest(request: Request) -> dict[str, bool]:
    service = _service(request)
    if service.suggestions is None:
        raise ApiError(403, "Suggestions are disabled on this server.")
    values = await _checked_values(request)
    found = {name: values.get(name) for name in ("q", "s", "source", "target")}
    for name, value in found.items():
        if not isinstance(value, str) or not value:
            raise BadRequest(f"Invalid request: missing {name} parameter")
        checks.text(value, name)
    size, limit = len(found["q"]) + len(found["s"]), service.settings.char_limit
    if size > limit:
        raise BadRequest(f"Invalid request: request ({size}) exceeds text limit ({limit})")
    await asyncio.to_thread(service.suggestions.add, **found)
    return {"success": True}


def _upload(values: dict[str, Any]) -> tuple[UploadFile, str]:
    """The one file of a ``/translate_file`` request, and its name."""
    upload = values.get("file")
    if isinstance(upload, list):
        raise BadRequest(f"Invalid request: send one file, got {len(upload)} file parts")
    if not isinstance(upload, UploadFile):
        raise BadRequest("Invalid request: missing file parameter")
    for name in ("source", "target"):
        if not values.get(name):
            raise BadRequest(f"Invalid request: missing {name} parameter")
    filename = Path(upload.filename or "").name
    if not filename:
        raise BadRequest("Invalid request: empty file")
    return upload, filename


async def translate_file(request: Request) -> dict[str, str]:
    service, values = _service(request), await _checked_values(request)
    settings = service.settings
    upload, filename = _upload(values)
    document = document_format(filename)
    source, target = str(values["source"]), str(values["target"])
    options = _options(settings, values, 0)
    if document is None:
        limit = settings.char_limit
        text = checks.file_text(await read_upload(upload, 4 * limit + 3), limit)
        language = _source(service, source, text, target)
        content = (await _translate_lines(service, language, target, text, options)).encode()
        summary = None
    else:
        text_options = document_options(options, document)

        async def translate(texts: list[str]) -> list[Translated]:
            language = _source(service, source, texts, target)
            languages = [language] * len(texts)
            found = await service.translate_each(texts, languages, target, text_options)
            return reviewed(found, options.min_confidence)

        data = await read_upload(upload, settings.max_file_bytes)
        content, summary = await translate_document_file(
            data,
            document,
            filename,
            settings,
            translate,
            documents=service.documents,
            retranslate=options.retranslate,
            target=target,
        )
    name = await asyncio.to_thread(service.files.add, filename, content)
    answer = {"translatedFileUrl": str(request.url_for("download_file", name=name))}
    return answer if summary is None else {**answer, "summary": summary}


async def download_file(request: Request, name: str) -> Response:
    service = _service(request)
    content = await asyncio.to_thread(service.files.get, name)
    if content is None:
        raise ApiError(
            404,
            f"no translated file {name} (the latest {KEPT_FILES} are kept for "
            f"{service.settings.file_expiry:g}s)",
        )
    original = name.split(".", 1)[1]
    return Response(
        content,
        media_type=media_type(original),
        headers={"Content-Disposition": f'attachment; filename="{original}"'},
    )


async def translate(request: Request) -> JSONResponse:
    service, values = _service(request), await _checked_values(request)
    settings = service.settings
    texts = checks.texts(values, "q", settings.char_limit)
    source = checks.word(values, "source") or "auto"
    target = checks.word(values, "target")
    if not target:
        raise BadRequest("Invalid request: missing target parameter")
    detected = None
    if source == "auto":
        found = service.sources_of(texts, target)
        detected = [{"confidence": value, "language": code} for code, value in found]
    sources = [d["language"] for d in detected] if detected else [source] * len(texts)
    alternatives = checks.whole_number(
        values, "alternatives", 0, minimum=0, maximum=settings.max_alternatives
    )
    options = _options(settings, values, alternatives)
    texts = [t if visible(t) else "" for t in texts]  # zero-width only: nothing to translate
    found = await service.translate_each(texts, sources, target, options)
    answers = [[h.text for h in hyps] for hyps in found]
    single = isinstance(values["q"], str)
    body: dict[str, Any] = {
        "translatedText": answers[0][0] if single else [a[0] for a in answers],
        **answer_fields(found, single=single, flagging=options.min_confidence > 0),
    }
    if alternatives:
        body["alternatives"] = answers[0][1:] if single else [a[1:] for a in answers]
    if detected is not None:
        body["detectedLanguage"] = detected[0] if single else detected
    return JSONResponse(body)


async def attention(request: Request, q: str = "", translation: str = "") -> Response:
    service, values = _service(request), request.query_params
    check_key(service.settings, values.get("api_key"))
    q, translation = checks.text(q, "q"), checks.text(translation, "translation")
    if not visible(q) or not visible(translation):
        raise BadRequest("Invalid request: give q and its translation")
    limit = min(service.settings.char_limit, ATTENTION_CHAR_LIMIT)
    if len(q) + len(translation) > limit:
        raise BadRequest(
            f"Invalid request: q and translation are longer than {limit} characters "
            "together (an attention picture's memory grows with both lengths)"
        )
    first = service.first
    pair, _ = service.route(values.get("source", first.source), values.get("target", first.target))
    png = await service.attention_png(pair, q.strip(), translation.strip())
    return Response(png, media_type="image/png")


ROUTES: list[tuple[str, Callable[..., Any], list[str], dict[str, Any]]] = [
    ("/", page, ["GET"], {"response_class": HTMLResponse}),
    ("/languages", languages, ["GET", "POST"], {}),
    ("/detect", detect, ["POST"], {}),
    ("/frontend/settings", frontend_settings, ["GET"], {}),
    ("/suggest", suggest, ["POST"], {}),
    ("/translate_file", translate_file, ["POST"], {}),
    ("/download_file/{name}", download_file, ["GET"], {"name": "download_file"}),
    ("/translate", translate, ["POST"], {}),
    ("/attention.png", attention, ["GET"], {}),
]


def _options(settings: ServeSettings, values: dict[str, Any], alternatives: int) -> SearchOptions:
    """The server's decoding options with a request's own (``terms.requested_options``)
    and its ``alternatives`` (a beam at least as wide as the hypotheses asked for)."""
    nbest = alternatives + 1
    base = dataclasses.replace(settings.decode, beam=max(settings.decode.beam, nbest), nbest=nbest)
    return requested_options(base, values)


def _source(service: LibreTranslate, source: str, text: str | list[str], target: str) -> str:
    """``source``, or with ``auto`` the language of ``text`` (its first characters)."""
    if source != "auto":
        return source
    sample = text if isinstance(text, str) else "\n".join(text)
    return service.source_of(sample[: service.settings.char_limit], target)[0]


async def _translate_lines(
    service: LibreTranslate, source: str, target: str, text: str, options: SearchOptions
) -> str:
    """``text`` with each line that has words translated; blank lines, each line's leading
    and trailing spaces and its line break kept."""
    lines = text.splitlines(keepends=True)
    todo = [i for i, line in enumerate(lines) if line.strip()]
    texts = [lines[i].strip() for i in todo]
    found = await service.translate_each(texts, [source] * len(texts), target, options)
    for i, hyps in zip(todo, found, strict=True):
        line = lines[i]
        lead = line[: len(line) - len(line.lstrip())]
        trail = line[len(line.rstrip()) :]
        lines[i] = lead + hyps[0].text + trail
    return "".join(lines)
