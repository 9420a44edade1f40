"""LibreTranslate's HTTP API for a translation model, written from its public documentation:
``POST /translate`` (``q`` a string or a list, ``source`` or ``auto``, ``target``, ``format``
``text`` or ``html``, ``alternatives``), ``GET /languages``, ``POST /detect``, ``GET /health``;
errors as ``{"error": ...}`` with 400, 403, 429, 500 (and 503 while stopping or on time-out).
Also the web page at ``/`` and the attention heatmap it shows.
"""

from __future__ import annotations

import asyncio
import html
import re
import threading
from typing import Any

from fastapi import FastAPI, Request
from fastapi.responses import HTMLResponse, JSONResponse, Response

from aiayn.decode.process import DecoderCrashed, DecoderSpec, TranslatorProcess
from aiayn.decode.translator import SearchOptions, TranslationError, Translator
from aiayn.serve.app import ApiError, ServeSettings, check_key, request_values
from aiayn.serve.engine import Busy, ShuttingDown, TranslationEngine
from aiayn.serve.page import PAGE

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


class Service:
    """The translation model, its languages and the engine that decodes for it."""

    def __init__(self, settings: ServeSettings):
        self.settings = settings
        spec = DecoderSpec(settings.model, settings.device, settings.profile, settings.threads)
        decoders = [TranslatorProcess(spec) for _ in range(settings.workers)]
        try:
            for decoder in decoders:
                decoder.wait_ready()
            self.translator = Translator.from_dir(  # tokens and the attention picture
                settings.model, device=settings.device, profile=settings.profile
            )
        except BaseException:
            for decoder in decoders:
                decoder.close()
            raise
        self.source = self.translator.src_lang or "auto"
        self.target = self.translator.tgt_lang or "target"
        self.engine = TranslationEngine(
            decoders,
            batch_tokens=settings.batch_tokens,
            max_wait_ms=settings.max_wait_ms,
            queue_size=settings.queue_size,
        )
        self._plot_lock = threading.Lock()  # pyplot draws one figure at a time

    def close(self) -> None:
        self.engine.close()

    def summary(self) -> str:
        stats = self.engine.stats
        return (
            f"answered {stats.requests:,} translation requests "
            f"({stats.sentences:,} sentences in {stats.batches:,} batches)"
        )

    def languages(self) -> list[dict[str, Any]]:
        def entry(code: str, targets: list[str]) -> dict[str, Any]:
            return {"code": code, "name": LANGUAGE_NAMES.get(code, code), "targets": targets}

        return [entry(self.source, [self.target]), entry(self.target, [])]

    def target_token(self, target: str) -> str | None:
        """None for the model's target language; for a multilingual model, the token of
        another target (``fra`` or ``>>fra<<`` -> ``>>fra<<``)."""
        if target == self.target:
            return None
        token = target if target.startswith(">>") else f">>{target}<<"
        if self.translator.src_tokenizer.piece_id(token) is None:
            raise ApiError(
                400, f"{target} is not supported (this model translates to {self.target})"
            )
        return token

    async def translate(self, texts: list[str], options: SearchOptions, token: str | None):
        try:
            return await self.engine.translate(
                texts, options, target_token=token, timeout=self.settings.timeout
            )
        except Busy as e:
            raise ApiError(429, f"Slowdown: {e}") from None
        except (ShuttingDown, DecoderCrashed) as e:
            raise ApiError(503, str(e)) from None
        except TimeoutError:
            raise ApiError(503, f"Timed out after {self.settings.timeout:g}s") from None
        except TranslationError as e:
            raise ApiError(400, str(e)) from None

    def attention_png(self, source: str, translation: str) -> bytes:
        """The encoder–decoder attention of ``translation`` of ``source``, every layer and
        head, drawn as ``aiayn plot attention`` draws it."""
        import io

        from aiayn.viz import attention_figure, translation_attention

        translator = self.translator
        src = translator.src_tokenizer.encode([source])[0]
        tgt = translator.tgt_tokenizer.encode([translation])[0]
        data = translation_attention(translator, src, tgt)
        with self._plot_lock:
            figure = attention_figure(data, "cross")
            buffer = io.BytesIO()
            figure.savefig(buffer, format="png", dpi=80, bbox_inches="tight")
            from aiayn.viz.common import pyplot

            pyplot().close(figure)
        return buffer.getvalue()


def install(app: FastAPI, service: Service) -> None:
    settings = service.settings

    @app.get("/", response_class=HTMLResponse)
    async def page() -> str:
        return PAGE.replace("__SOURCE__", service.source).replace("__TARGET__", service.target)

    @app.get("/health")
    async def health() -> dict[str, Any]:
        stats = service.engine.stats
        return {"status": "ok", "batches": stats.batches, "requests": stats.requests}

    @app.api_route("/languages", methods=["GET", "POST"])
    async def languages() -> list[dict[str, Any]]:
        return service.languages()

    @app.post("/detect")
    async def detect(request: Request) -> list[dict[str, Any]]:
        values = await request_values(request)
        check_key(settings, values.get("api_key"))
        _texts(values, settings.char_limit)
        return [{"confidence": 100.0, "language": service.source}]

    @app.post("/translate")
    async def translate(request: Request) -> JSONResponse:
        values = await request_values(request)
        check_key(settings, values.get("api_key"))
        texts = _texts(values, settings.char_limit)
        source = str(values.get("source") or "auto")
        if source not in ("auto", service.source):
            raise ApiError(
                400, f"{source} is not supported (this model translates from {service.source})"
            )
        target = values.get("target")
        if not target:
            raise ApiError(400, "Invalid request: missing target parameter")
        token = service.target_token(str(target))
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
            answers = [await _translate_html(service, t, options, token) for t in texts]
        else:
            found = await service.translate(texts, options, token)
            answers = [[h.text for h in hyps] for hyps in found]
        single = isinstance(values["q"], str)
        body: dict[str, Any] = {
            "translatedText": answers[0][0] if single else [a[0] for a in answers]
        }
        if alternatives:
            body["alternatives"] = answers[0][1:] if single else [a[1:] for a in answers]
        if source == "auto":
            detected = {"confidence": 100.0, "language": service.source}
            body["detectedLanguage"] = detected if single else [detected] * len(texts)
        return JSONResponse(body)

    @app.get("/attention.png")
    async def attention(request: Request, q: str = "", translation: str = "") -> Response:
        check_key(settings, request.query_params.get("api_key"))
        if not q.strip() or not translation.strip():
            raise ApiError(400, "Invalid request: give q and its translation")
        if len(q) + len(translation) > settings.char_limit:
            raise ApiError(400, f"Invalid request: longer than {settings.char_limit} characters")
        png = await asyncio.to_thread(service.attention_png, q.strip(), translation.strip())
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
    service: Service, document: str, options: SearchOptions, token: str | None
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
    found = await service.translate(texts, options, token) if texts else []
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
