"""LibreTranslate's HTTP API for translation models, written from its public documentation:
``POST /translate`` (``q`` a string or a list, ``source`` or ``auto``, ``target``, ``format``
``text`` or ``html``, ``alternatives``), ``GET /languages``, ``POST /detect``; errors as
``{"error": ...}`` with 400, 403, 429, 500 (and 503 while stopping or on time-out). Several
models, each under its language pair: a request goes to the model of its source and target.
Also the web page at ``/`` and the attention heatmap it shows.
"""

from __future__ import annotations

import html
import re
from dataclasses import dataclass
from typing import Any

from fastapi import FastAPI, Request
from fastapi.responses import HTMLResponse, JSONResponse, Response

from aiayn.data.tokenizer import Tokenizer
from aiayn.data.tokenizer_files import load_tokenizers
from aiayn.decode.process import DecoderCrashed, DecoderSpec, TranslatorProcess
from aiayn.decode.translator import SearchOptions, Translation, TranslationError
from aiayn.errors import AiaynError
from aiayn.serve.common import ApiError, ServeSettings, check_key, request_values
from aiayn.serve.engine import Busy, ShuttingDown, TranslationEngine
from aiayn.serve.page import PAGE
from aiayn.serve.picture import attention_png

LANGUAGE_NAMES = {
    "ar": "Arabic", "cs": "Czech", "da": "Danish", "de": "German", "el": "Greek",
    "en": "English", "es": "Spanish", "et": "Estonian", "fi": "Finnish", "fr": "French",
    "he": "Hebrew", "hi": "Hindi", "hu": "Hungarian", "it": "Italian", "ja": "Japanese",
    "ko": "Korean", "lt": "Lithuanian", "lv": "Latvian", "nl": "Dutch", "pl": "Polish",
    "pt": "Portuguese", "ro": "Romanian", "ru": "Russian", "sk": "Slovak", "sv": "Swedish",
    "tr": "Turkish", "uk": "Ukrainian", "zh": "Chinese",
}  # fmt: skip
TAG = re.compile(r"(<!--.*?-->|<[^>]*>)", re.DOTALL)
RAW_TEXT = re.compile(r"<(script|style)\b", re.IGNORECASE)


@dataclass(eq=False)
class Pair:
    """One served model: its language pair and the engine that decodes for it."""

    model: str
    source: str  # ISO code, or "auto" / "target" when the model directory names none
    target: str
    tokenizer: Tokenizer  # the source side's: a multilingual model's target tokens
    engine: TranslationEngine


class LibreTranslate:
    """The translation models, their languages and the engines that decode for them
    (``settings.workers`` decoding processes per model)."""

    def __init__(self, settings: ServeSettings):
        self.settings = settings
        found = _languages(settings.models)
        spec = [
            DecoderSpec(model, settings.device, settings.profile, settings.threads)
            for model in settings.models
        ]
        started: list[TranslatorProcess] = []
        try:  # every process starts, then all load side by side
            decoders = [[TranslatorProcess(s) for _ in range(settings.workers)] for s in spec]
            started = [d for group in decoders for d in group]
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
                batch_tokens=settings.batch_tokens,
                max_wait_ms=settings.max_wait_ms,
                queue_size=settings.queue_size,
            )
            self.pairs[source, target] = Pair(model, source, target, tokenizer, engine)
        self.first = next(iter(self.pairs.values()))  # the page's pair

    def error_body(self, status: int, message: str, code: str | None) -> dict[str, Any]:
        return {"error": message}

    def health(self) -> dict[str, Any]:
        stats = [pair.engine.stats for pair in self.pairs.values()]
        return {
            "accepted": sum(s.accepted for s in stats),
            "batches": sum(s.batches for s in stats),
            "requests": sum(s.requests for s in stats),
        }

    def close(self) -> None:
        for pair in self.pairs.values():
            pair.engine.close()

    def summary(self) -> str:
        stats = [pair.engine.stats for pair in self.pairs.values()]
        return (
            f"answered {sum(s.requests for s in stats):,} translation requests "
            f"({sum(s.sentences for s in stats):,} sentences in "
            f"{sum(s.batches for s in stats):,} batches)"
        )

    def languages(self) -> list[dict[str, Any]]:
        """Every language served, each with the targets it translates to."""
        targets: dict[str, list[str]] = {}
        for source, target in self.pairs:
            targets.setdefault(source, []).append(target)
            targets.setdefault(target, [])
        return [
            {"code": code, "name": LANGUAGE_NAMES.get(code, code), "targets": found}
            for code, found in targets.items()
        ]

    def route(self, source: str, target: str) -> tuple[Pair, str | None]:
        """The model for ``source`` -> ``target``, and the target token to give it (a
        multilingual model's ``>>fra<<`` for ``fra`` or ``>>fra<<``; None for its own target).

        Raises:
            ApiError: 400 when no served model translates this pair.
        """
        if source == "auto":
            sources = {s for s, t in self.pairs if t == target} or {s for s, _ in self.pairs}
            if len(sources) > 1:
                raise ApiError(
                    400, f"give the source language: {target} is served from {_listed(sources)}"
                )
            source = next(iter(sources))
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
        first = service.first
        return PAGE.replace("__SOURCE__", first.source).replace("__TARGET__", first.target)

    @app.api_route("/languages", methods=["GET", "POST"])
    async def languages() -> list[dict[str, Any]]:
        return service.languages()

    @app.post("/detect")
    async def detect(request: Request) -> list[dict[str, Any]]:
        values = await request_values(request)
        check_key(settings, values.get("api_key"))
        _texts(values, settings.char_limit)
        return [{"confidence": 100.0, "language": service.first.source}]

    @app.post("/translate")
    async def translate(request: Request) -> JSONResponse:
        values = await request_values(request)
        check_key(settings, values.get("api_key"))
        texts = _texts(values, settings.char_limit)
        source = str(values.get("source") or "auto")
        target = values.get("target")
        if not target:
            raise ApiError(400, "Invalid request: missing target parameter")
        pair, token = service.route(source, str(target))
        text_format = str(values.get("format") or "text")
        if text_format not in ("text", "html"):
            raise ApiError(400, f"Invalid request: format must be text or html, got {text_format}")
        alternatives = _integer(values, "alternatives", 0, settings.max_alternatives)
        nbest = alternatives + 1
        options = SearchOptions(
            beam=max(settings.beam, nbest),
            alpha=settings.alpha or None,
            nbest=nbest,
            max_len_b=settings.max_len_b,
            precision=settings.precision,  # type: ignore[arg-type]
            stopping=settings.stopping,
        )
        if text_format == "html":
            answers = [await _translate_html(service, pair, t, options, token) for t in texts]
        else:
            found = await service.translate(pair, texts, options, token)
            answers = [[h.text for h in hyps] for hyps in found]
        single = isinstance(values["q"], str)
        body: dict[str, Any] = {
            "translatedText": answers[0][0] if single else [a[0] for a in answers]
        }
        if alternatives:
            body["alternatives"] = answers[0][1:] if single else [a[1:] for a in answers]
        if source == "auto":
            detected = {"confidence": 100.0, "language": pair.source}
            body["detectedLanguage"] = detected if single else [detected] * len(texts)
        return JSONResponse(body)

    @app.get("/attention.png")
    async def attention(request: Request, q: str = "", translation: str = "") -> Response:
        values = request.query_params
        check_key(settings, values.get("api_key"))
        if not q.strip() or not translation.strip():
            raise ApiError(400, "Invalid request: give q and its translation")
        if len(q) + len(translation) > settings.char_limit:
            raise ApiError(400, f"Invalid request: longer than {settings.char_limit} characters")
        first = service.first
        pair, _ = service.route(
            values.get("source", first.source), values.get("target", first.target)
        )
        png = await service.attention_png(pair, q.strip(), translation.strip())
        return Response(png, media_type="image/png")


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
    return texts


def _integer(values: dict[str, Any], name: str, low: int, high: int) -> int:
    raw = values.get(name, low)
    try:
        value = int(raw)
    except (TypeError, ValueError):
        raise ApiError(
            400, f"Invalid request: {name} must be a whole number, got {raw!r}"
        ) from None
    if not low <= value <= high:
        raise ApiError(400, f"Invalid request: {name} must be {low} to {high}, got {value}")
    return value


async def _translate_html(
    service: LibreTranslate, pair: Pair, document: str, options: SearchOptions, token: str | None
) -> list[str]:
    """``document`` with the text between its tags translated and the tags kept (text in
    ``script`` and ``style`` is kept too); one string per alternative."""
    parts = TAG.split(document)  # text, tag, text, tag, ..., text
    todo = [
        i
        for i, part in enumerate(parts)
        if i % 2 == 0 and part.strip() and not (i and RAW_TEXT.match(parts[i - 1]))
    ]
    texts = [html.unescape(parts[i]).strip() for i in todo]
    found = await service.translate(pair, texts, options, token) if texts else []
    outputs = []
    for rank in range(options.nbest):
        out = list(parts)
        for i, hyps in zip(todo, found, strict=True):
            text = hyps[min(rank, len(hyps) - 1)].text
            lead = parts[i][: len(parts[i]) - len(parts[i].lstrip())]
            trail = parts[i][len(parts[i].rstrip()) :]
            out[i] = lead + html.escape(text, quote=False) + trail
        outputs.append("".join(out))
    return outputs
