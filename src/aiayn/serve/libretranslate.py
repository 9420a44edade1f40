"""LibreTranslate's HTTP API for translation models, written from its public documentation:
``POST /translate`` (``q`` a string or a list, ``source`` or ``auto``, ``target``, ``format``
``text`` or ``html``, ``alternatives``), ``POST /translate_file`` (a text file or a document,
multipart, ``aiayn.serve.files``; its translation at ``GET /download_file/...``),
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
import html
import json
import threading
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from fastapi import FastAPI, Request
from fastapi.responses import HTMLResponse, JSONResponse, Response
from starlette.datastructures import UploadFile

from aiayn.data.tokenizer import Tokenizer
from aiayn.data.tokenizer_files import load_tokenizers
from aiayn.decode.process import DecoderCrashed, DecoderSpec, TranslatorProcess
from aiayn.decode.translator import SearchOptions, Translation, TranslationError
from aiayn.errors import AiaynError
from aiayn.serve import checks
from aiayn.serve.checks import visible
from aiayn.serve.common import ApiError, ServeSettings, check_key, request_values
from aiayn.serve.detect import LanguageIdentifier
from aiayn.serve.engine import Busy, ShuttingDown, TranslationEngine
from aiayn.serve.files import (
    FILE_FORMATS,
    KEPT_FILES,
    TranslatedFiles,
    document_format,
    media_type,
    translate_document_file,
)
from aiayn.serve.limits import read_upload
from aiayn.serve.page import PAGE
from aiayn.serve.picture import attention_png
from aiayn.serve.routing import PIVOT, Leg, Pair, pivots, translate_grouped
from aiayn.serve.terms import answer_fields, requested_options

LANGUAGE_NAMES = {
    "ar": "Arabic", "cs": "Czech", "da": "Danish", "de": "German", "el": "Greek",
    "en": "English", "es": "Spanish", "et": "Estonian", "fi": "Finnish", "fr": "French",
    "he": "Hebrew", "hi": "Hindi", "hu": "Hungarian", "it": "Italian", "ja": "Japanese",
    "ko": "Korean", "lt": "Lithuanian", "lv": "Latvian", "nl": "Dutch", "pl": "Polish",
    "pt": "Portuguese", "ro": "Romanian", "ru": "Russian", "sk": "Slovak", "sv": "Swedish",
    "tr": "Turkish", "uk": "Ukrainian", "zh": "Chinese",
}  # fmt: skip
FRONTEND_TIMEOUT_MS = 500  # what LibreTranslate's page waits after typing before it translates
# The attention picture's characters (source and translation together) at most: its memory
# grows with layers x heads x both lengths (2,800 characters once took 4.6 GB and a minute).
ATTENTION_CHAR_LIMIT = 300


class Suggestions:
    """Better translations users suggest (``/suggest``), one JSON object a line appended to
    a file (``aiayn serve --suggestions FILE``)."""

    def __init__(self, path: str | Path):
        self.path = Path(path)
        try:
            with self.path.open("a", encoding="utf-8"):
                pass
        except OSError as e:
            raise AiaynError(f"{path}: cannot write suggestions there ({e.strerror})") from None
        self._lock = threading.Lock()

    def add(self, *, q: str, s: str, source: str, target: str) -> None:
        line = json.dumps({"q": q, "s": s, "source": source, "target": target}, ensure_ascii=False)
        with self._lock, self.path.open("a", encoding="utf-8") as out:
            out.write(line + "\n")


class LibreTranslate:
    """The translation models, their languages and the engines that decode for them
    (``settings.workers`` decoding processes per model)."""

    def __init__(self, settings: ServeSettings):
        self.settings = settings
        self.suggestions = Suggestions(settings.suggestions) if settings.suggestions else None
        found = _languages(settings.models)
        spec = [
            DecoderSpec(model, settings.device, settings.profile, settings.threads)
            for model in settings.models
        ]
        started: list[TranslatorProcess] = []
        decoders: list[list[TranslatorProcess]] = []
        try:  # every process starts, then all load side by side
            for each in spec:
                decoders.append([])
                for _ in range(settings.workers):
                    started.append(TranslatorProcess(each))
                    decoders[-1].append(started[-1])
            for decoder in started:
                decoder.wait_ready()
        except BaseException:
            for decoder in started:
                decoder.close()
            raise
        self.pairs: dict[tuple[str, str], Pair] = {}
        for (model, source, target, tokenizer), group in zip(found, decoders, strict=True):
            engine = TranslationEngine(
                group,
                batch_tokens=settings.decode.batch_tokens,
                max_wait_ms=settings.max_wait_ms,
                queue_size=settings.queue_size,
            )
            self.pairs[source, target] = Pair(model, source, target, tokenizer, engine)
        self.first = next(iter(self.pairs.values()))  # what requests without languages get
        self.pivots = pivots(self.pairs)  # pairs translated through English
        self.identifier = LanguageIdentifier(code for pair in self.pairs for code in pair)
        self.files = TranslatedFiles(expire_s=settings.files_expire_s)

    def error_body(self, status: int, message: str, code: str | None) -> dict[str, Any]:
        return {"error": message}

    def health(self) -> dict[str, Any]:
        stats = [pair.engine.stats for pair in self.pairs.values()]
        return {
            "accepted": sum(s.accepted for s in stats),
            "batches": sum(s.batches for s in stats),
            "requests": sum(s.requests for s in stats),
            "decoders_restarted": sum(
                getattr(d, "restarts", 0) for p in self.pairs.values() for d in p.engine.decoders
            ),
        }

    def close(self) -> None:
        for pair in self.pairs.values():
            pair.engine.close()
        self.files.close()

    def summary(self) -> str:
        stats = [pair.engine.stats for pair in self.pairs.values()]
        return (
            f"answered {sum(s.requests for s in stats):,} translation requests "
            f"({sum(s.texts for s in stats):,} texts in "
            f"{sum(s.batches for s in stats):,} batches)"
        )

    def languages(self) -> list[dict[str, Any]]:
        """Every language served, each with the targets it translates to; ``pivot`` names
        the targets reached through English (two decodes) and the language between."""
        targets: dict[str, list[str]] = {}
        for source, target in [*self.pairs, *self.pivots]:
            targets.setdefault(source, []).append(target)
            targets.setdefault(target, [])
        return [
            {
                "code": code,
                "name": LANGUAGE_NAMES.get(code, code),
                "targets": found,
                **({"pivot": through} if (through := self._through(code)) else {}),
            }
            for code, found in targets.items()
        ]

    def _through(self, source: str) -> dict[str, str]:
        return {t: PIVOT for s, t in self.pivots if s == source}

    def plan(self, source: str, target: str) -> list[Leg]:
        """The models that translate ``source`` -> ``target``: its own (``route``), else two
        through English.

        Raises:
            ApiError: 400 when neither is served (``route``'s message).
        """
        try:
            return [self.route(source, target)]
        except ApiError:
            through = self.pivots.get((source, target))
            if through is None:
                raise
            return [(through[0], None), (through[1], None)]

    def sources_of(self, texts: list[str], target: str) -> list[tuple[str, float]]:
        """Each text's source language for ``source: auto`` (``source_of``), found for
        each text on its own; a text without a letter takes that of all texts together."""
        together: tuple[str, float] | None = None
        found = []
        for text in texts:
            if any(c.isalpha() for c in text):
                found.append(self.source_of(text, target))
                continue
            if together is None:
                together = self.source_of("\n".join(texts), target)
            found.append(together)
        return found

    async def translate_each(
        self, texts: list[str], sources: list[str], target: str, options: SearchOptions
    ) -> list[list[Translation]]:
        """Text ``i`` translated from ``sources[i]`` (``plan``): each language's texts in one
        request, the languages side by side."""
        plans = {source: self.plan(source, target) for source in dict.fromkeys(sources)}
        return await translate_grouped(self.translate, [plans[s] for s in sources], texts, options)

    def detect(self, text: str) -> list[dict[str, Any]]:
        """``/detect``: the served languages, most likely first, with lingua's confidence."""
        return [
            {"confidence": value, "language": code}
            for code, value in self.identifier.confidences(text)
        ]

    def source_of(self, text: str, target: str) -> tuple[str, float]:
        """The source language of ``text`` for ``source: auto``, and the confidence in it: the
        most likely of the languages served toward ``target`` (of every served source when
        none is: a multilingual model's target). One such language is taken as it is (with
        confidence 0 when lingua does not know it).

        Raises:
            ApiError: 400 when lingua finds none of the languages it knows among them in the
                text (digits only), or several could be meant and none is identified.
        """
        sources = {s for s, t in self.pairs if t == target} or {s for s, _ in self.pairs}
        for code, value in self.identifier.confidences(text):
            if code in sources and value > 0:
                return code, value
        if sources & set(self.identifier.codes.values()):  # lingua knows them, found none
            raise ApiError(
                400,
                "no language identified in the text (digits or symbols only?); "
                "give the source language",
            )
        if len(sources) > 1:
            raise ApiError(
                400, f"give the source language: {target} is served from {_listed(sources)}"
            )
        return next(iter(sources)), 0.0

    def route(self, source: str, target: str) -> tuple[Pair, str | None]:
        """The model for ``source`` -> ``target``, and the target token to give it (a
        multilingual model's ``>>fra<<`` for ``fra`` or ``>>fra<<``; None for its own target).

        Raises:
            ApiError: 400 when no served model translates this pair.
        """
        pair = self.pairs.get((source, target))
        if pair is not None:
            return pair, None
        from_source = [p for p in self.pairs.values() if p.source == source]
        if not from_source:
            served = {s for s, _ in self.pairs}
            raise ApiError(
                400, f"{source} is not supported (this server translates from {_listed(served)})"
            )
        token = target if target.startswith(">>") else f">>{target}<<"
        for pair in from_source:
            if pair.tokenizer.piece_id(token) is not None:
                return pair, token
        targets = {p.target for p in from_source}
        raise ApiError(
            400,
            f"{target} is not supported "
            f"(from {source} this server translates to {_listed(targets)})",
        )

    async def translate(
        self, pair: Pair, texts: list[str], options: SearchOptions, token: str | None
    ) -> list[list[Translation]]:
        """Every translation this API answers, decoded by ``pair``'s engine."""
        return await self._engine_call(
            pair,
            pair.engine.translate(
                texts, options, target_token=token, timeout=self.settings.timeout
            ),
        )

    async def attention_png(self, pair: Pair, source: str, translation: str) -> bytes:
        """The page's attention picture, drawn by a decoding process of ``pair``'s model."""
        return await self._engine_call(
            pair,
            pair.engine.call(attention_png, source, translation, timeout=self.settings.timeout),
        )

    async def _engine_call(self, pair: Pair, work):
        try:
            return await work
        except Busy as e:
            raise ApiError(429, f"Slowdown: {e}") from None
        except (ShuttingDown, DecoderCrashed) as e:
            raise ApiError(503, str(e)) from None
        except TimeoutError:
            raise ApiError(503, f"Timed out after {self.settings.timeout:g}s") from None
        except TranslationError as e:
            raise ApiError(400, str(e)) from None

    def install(self, app: FastAPI) -> None:
        _install(app, self)


def _languages(models: tuple[str, ...]) -> list[tuple[str, str, str, Tokenizer]]:
    """(model, source, target, source tokenizer) of each model, refusing a second model for
    a pair.

    Raises:
        AiaynError: two models for one language pair.
    """
    found: dict[tuple[str, str], str] = {}
    out = []
    for model in models:
        src, _, info = load_tokenizers(model)
        pair = (info.src_lang or "auto", info.tgt_lang or "target")
        if pair in found:
            raise AiaynError(
                f"{model}: a second model for {pair[0]}-{pair[1]} (already {found[pair]})"
            )
        found[pair] = model
        out.append((model, *pair, src))
    return out


def _listed(codes: set[str]) -> str:
    return ", ".join(sorted(codes))


def _install(app: FastAPI, service: LibreTranslate) -> None:
    settings = service.settings

    @app.get("/", response_class=HTMLResponse)
    async def page() -> str:
        return PAGE.replace("__PAIRS__", _pair_options(service.pairs.values(), service.pivots))

    @app.api_route("/languages", methods=["GET", "POST"])
    async def languages() -> list[dict[str, Any]]:
        return service.languages()

    @app.post("/detect")
    async def detect(request: Request) -> list[Any]:
        values = await request_values(request)
        check_key(settings, values.get("api_key"))
        texts = _texts(values, settings.char_limit)
        if isinstance(values["q"], list):  # each text on its own
            return [service.detect(text) for text in texts]
        return service.detect("\n".join(texts))

    @app.get("/frontend/settings")
    async def frontend_settings() -> dict[str, Any]:
        first = service.first
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
                "source": {"code": first.source, "name": _name(first.source)},
                "target": {"code": first.target, "name": _name(first.target)},
            },
        }

    @app.post("/suggest")
    async def suggest(request: Request) -> dict[str, bool]:
        if service.suggestions is None:
            raise ApiError(403, "Suggestions are disabled on this server.")
        values = await request_values(request)
        check_key(settings, values.get("api_key"))
        found = {name: values.get(name) for name in ("q", "s", "source", "target")}
        for name, value in found.items():
            if not isinstance(value, str) or not value:
                raise ApiError(400, f"Invalid request: missing {name} parameter")
            _checked_text(value, name)
        size = len(found["q"]) + len(found["s"])
        if size > settings.char_limit:
            raise ApiError(
                400, f"Invalid request: request ({size}) exceeds text limit ({settings.char_limit})"
            )
        await asyncio.to_thread(service.suggestions.add, **found)
        return {"success": True}

    @app.post("/translate_file")
    async def translate_file(request: Request) -> dict[str, str]:
        values = await request_values(request)
        check_key(settings, values.get("api_key"))
        upload = values.get("file")
        if isinstance(upload, list):
            raise ApiError(400, f"Invalid request: send one file, got {len(upload)} file parts")
        if not isinstance(upload, UploadFile):
            raise ApiError(400, "Invalid request: missing file parameter")
        for name in ("source", "target"):
            if not values.get(name):
                raise ApiError(400, f"Invalid request: missing {name} parameter")
        filename = Path(upload.filename or "").name
        if not filename:
            raise ApiError(400, "Invalid request: empty file")
        document = document_format(filename)
        source, target = str(values["source"]), str(values["target"])
        options = _options(settings, values, 0)
        if document is None:
            text = _file_text(
                await read_upload(upload, 4 * settings.char_limit + 3), settings.char_limit
            )
            language = _source(service, source, text, target)
            content = (await _translate_lines(service, language, target, text, options)).encode()
        else:

            async def translate(texts: list[str]) -> list[str]:
                language = _source(service, source, texts, target)
                found = await service.translate_each(
                    texts, [language] * len(texts), target, options
                )
                return [h[0].text for h in found]

            data = await read_upload(upload, settings.file_max_bytes)
            content = await translate_document_file(data, document, filename, settings, translate)
        name = await asyncio.to_thread(service.files.add, filename, content)
        return {"translatedFileUrl": str(request.url_for("download_file", name=name))}

    @app.get("/download_file/{name}", name="download_file")
    async def download_file(name: str) -> Response:
        content = await asyncio.to_thread(service.files.get, name)
        if content is None:
            raise ApiError(
                404,
                f"no translated file {name} (the latest {KEPT_FILES} are kept for "
                f"{settings.files_expire_s:g}s)",
            )
        original = name.split(".", 1)[1]
        return Response(
            content,
            media_type=media_type(original),
            headers={"Content-Disposition": f'attachment; filename="{original}"'},
        )

    @app.post("/translate")
    async def translate(request: Request) -> JSONResponse:
        values = await request_values(request)
        check_key(settings, values.get("api_key"))
        texts = _texts(values, settings.char_limit)
        source = _word(values, "source") or "auto"
        target = _word(values, "target")
        if not target:
            raise ApiError(400, "Invalid request: missing target parameter")
        detected = None
        if source == "auto":
            found = service.sources_of(texts, target)
            detected = [{"confidence": value, "language": code} for code, value in found]
        sources = [d["language"] for d in detected] if detected else [source] * len(texts)
        alternatives = _integer(values, "alternatives", 0, settings.max_alternatives)
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

    @app.get("/attention.png")
    async def attention(request: Request, q: str = "", translation: str = "") -> Response:
        values = request.query_params
        check_key(settings, values.get("api_key"))
        q, translation = _checked_text(q, "q"), _checked_text(translation, "translation")
        if not visible(q) or not visible(translation):
            raise ApiError(400, "Invalid request: give q and its translation")
        limit = min(settings.char_limit, ATTENTION_CHAR_LIMIT)
        if len(q) + len(translation) > limit:
            raise ApiError(
                400,
                f"Invalid request: q and translation are longer than {limit} characters "
                "together (an attention picture's memory grows with both lengths)",
            )
        first = service.first
        pair, _ = service.route(
            values.get("source", first.source), values.get("target", first.target)
        )
        png = await service.attention_png(pair, q.strip(), translation.strip())
        return Response(png, media_type="image/png")


def _options(settings: ServeSettings, values: dict[str, Any], alternatives: int) -> SearchOptions:
    """The server's decoding options with a request's own (``terms.requested_options``)
    and its ``alternatives`` (a beam at least as wide as the hypotheses asked for)."""
    nbest = alternatives + 1
    base = dataclasses.replace(settings.decode, beam=max(settings.decode.beam, nbest), nbest=nbest)
    return requested_options(base, values)


def _pair_options(pairs: Iterable[Pair], through: Iterable[tuple[str, str]] = ()) -> str:
    """The page's ``<option>`` for each served pair, in the order served, then each pair
    translated through English (its cost said)."""
    served = [(p.source, p.target, "") for p in pairs]
    bridged = [(s, t, f" (through {_name(PIVOT)}: two decodes)") for s, t in through]
    return "".join(
        f'<option value="{html.escape(source)} {html.escape(target)}">'
        f"{html.escape(_name(source))} &rarr; {html.escape(_name(target))}"
        f"{html.escape(note)}</option>"
        for source, target, note in served + bridged
    )


def _name(code: str) -> str:
    return LANGUAGE_NAMES.get(code, code)


def _file_text(content: bytes | None, char_limit: int) -> str:
    """A text file's content (UTF-8, a byte-order mark allowed), within the text limit
    (``None``: a file of more bytes than that many characters can take, left unread).

    Raises:
        ApiError: 400 for an empty, undecodable or too long file.
    """
    if content is None:
        raise ApiError(400, f"Invalid request: the file exceeds text limit ({char_limit})")
    try:
        text = content.decode("utf-8-sig")
    except UnicodeDecodeError as e:
        raise ApiError(400, f"Invalid request: the file is not UTF-8 text ({e.reason})") from None
    if not text.strip():
        raise ApiError(400, "Invalid request: empty file")
    if len(text) > char_limit:
        raise ApiError(
            400, f"Invalid request: request ({len(text)}) exceeds text limit ({char_limit})"
        )
    return text


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


def _texts(values: dict[str, Any], char_limit: int) -> list[str]:
    q = values.get("q")
    if q is None or q == "" or q == []:
        raise ApiError(400, "Invalid request: missing q parameter")
    texts = [q] if isinstance(q, str) else q
    if not isinstance(texts, list) or not all(isinstance(t, str) for t in texts):
        raise ApiError(400, "Invalid request: q must be a string or a list of strings")
    size = sum(len(t) for t in texts)
    if size > char_limit:
        raise ApiError(400, f"Invalid request: request ({size}) exceeds text limit ({char_limit})")
    return [_checked_text(t, "q") for t in texts]


def _checked_text(value: Any, name: str) -> str:
    try:
        return checks.text(value, name)
    except checks.BadRequest as e:
        raise ApiError(400, str(e)) from None


def _word(values: dict[str, Any], name: str) -> str:
    """A short string parameter (a language code, a format)."""
    value = values.get(name)
    if value is None:
        return ""
    if not isinstance(value, str):
        raise ApiError(400, f"Invalid request: {name} must be a string, got {type(value).__name__}")
    return _checked_text(value, name).strip()


def _integer(values: dict[str, Any], name: str, low: int, high: int) -> int:
    try:
        return checks.whole_number(values, name, low, minimum=low, maximum=high)
    except checks.BadRequest as e:
        raise ApiError(400, str(e)) from None
