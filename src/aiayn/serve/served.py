"""What a LibreTranslate server serves: its translation models (``ServedModels``: their
language pairs and names, routing, the engines' calls) and the file of suggested
translations. ``aiayn.serve.libretranslate`` puts LibreTranslate's routes over them."""

from __future__ import annotations

import asyncio
import html
import json
import threading
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from aiayn.data.tokenizer import Tokenizer
from aiayn.data.tokenizer_files import load_tokenizers
from aiayn.errors import AiaynError
from aiayn.serve.checks import BadRequest
from aiayn.serve.picture import attention_png
from aiayn.serve.service import ApiError
from aiayn.serve.settings import ServeSettings
from aiayn.serve.translated_files import TranslatedFiles
from aiayn.translate.detect import LanguageIdentifier
from aiayn.translate.routing import PIVOT, between, detect_each, grouped, pivots
from aiayn.translate.translator import SearchOptions, Translation, TranslationError
from aiayn.workers.document_process import DocumentProcesses
from aiayn.workers.engines import Busy, ShuttingDown, TranslationEngine
from aiayn.workers.translator_process import DecoderCrashed, DecoderSpec, TranslatorProcess

LANGUAGE_NAMES = {
    "ar": "Arabic", "cs": "Czech", "da": "Danish", "de": "German", "el": "Greek",
    "en": "English", "es": "Spanish", "et": "Estonian", "fi": "Finnish", "fr": "French",
    "he": "Hebrew", "hi": "Hindi", "hu": "Hungarian", "it": "Italian", "ja": "Japanese",
    "ko": "Korean", "lt": "Lithuanian", "lv": "Latvian", "nl": "Dutch", "pl": "Polish",
    "pt": "Portuguese", "ro": "Romanian", "ru": "Russian", "sk": "Slovak", "sv": "Swedish",
    "tr": "Turkish", "uk": "Ukrainian", "zh": "Chinese",
}  # fmt: skip


@dataclass(eq=False)
class Pair:
    """One served model: its language pair and the engine that decodes for it."""

    model: str
    source: str  # ISO code, or "auto" / "target" when the model directory names none
    target: str
    tokenizer: Tokenizer  # the source side's: a multilingual model's target tokens
    engine: TranslationEngine


Leg = tuple[Pair, "str | None"]  # a model and the target token it is given


def language_name(code: str) -> str:
    return LANGUAGE_NAMES.get(code, code)


def listed(codes: set[str]) -> str:
    return ", ".join(sorted(codes))


def language_pairs(models: tuple[str, ...]) -> list[tuple[str, str, str, Tokenizer]]:
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


def pair_options(pairs: Iterable[Pair], through: Iterable[tuple[str, str]] = ()) -> str:
    """The page's ``<option>`` for each served pair, in the order served, then each pair
    translated through English (its cost said)."""
    served = [(p.source, p.target, "") for p in pairs]
    bridged = [(s, t, f" (through {language_name(PIVOT)}: two decodes)") for s, t in through]
    return "".join(
        f'<option value="{html.escape(source)} {html.escape(target)}">'
        f"{html.escape(language_name(source))} &rarr; {html.escape(language_name(target))}"
        f"{html.escape(note)}</option>"
        for source, target, note in served + bridged
    )


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


class ServedModels:
    """The translation models, their languages and the engines that decode for them
    (``settings.workers`` decoding processes per model): what LibreTranslate's routes ask
    (``aiayn.serve.libretranslate``)."""

    def __init__(self, settings: ServeSettings):
        self.settings = settings
        self.suggestions = Suggestions(settings.suggestions) if settings.suggestions else None
        found = language_pairs(settings.models)
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
        self.files = TranslatedFiles(expire_s=settings.file_expiry)
        self.documents = DocumentProcesses()  # uploads read and written away from the server

    def health(self) -> dict[str, Any]:
        stats = [pair.engine.stats for pair in self.pairs.values()]
        return {
            "accepted": sum(s.accepted for s in stats),
            "batches": sum(s.batches for s in stats),
            "requests": sum(s.requests for s in stats),
            "processes_restarted": sum(p.engine.processes_restarted for p in self.pairs.values()),
        }

    def close(self) -> None:
        for pair in self.pairs.values():
            pair.engine.close()
        self.files.close()
        self.documents.close()

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
                "name": language_name(code),
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
            BadRequest: when neither is served (``route``'s message).
        """
        try:
            return [self.route(source, target)]
        except BadRequest:
            through = self.pivots.get((source, target))
            if through is None:
                raise
            return [(through[0], None), (through[1], None)]

    def sources_of(self, texts: list[str], target: str) -> list[tuple[str, float]]:
        """Each text's source language for ``source: auto`` (``source_of``), with the
        routing's one rule for a text without a letter (``aiayn.translate.routing.detect_each``)."""
        return detect_each(texts, lambda text: self.source_of(text, target), lambda f: f[0])

    async def translate_each(
        self, texts: list[str], sources: list[str], target: str, options: SearchOptions
    ) -> list[list[Translation]]:
        """Text ``i`` translated from ``sources[i]`` (``plan``): the texts of one plan in one
        request, the plans' requests side by side, the answers in the texts' order."""
        plans = {source: self.plan(source, target) for source in dict.fromkeys(sources)}
        groups = grouped([[pair for pair, _ in plans[s]] for s in sources])
        found = await asyncio.gather(
            *(
                self._translate_legs(plans[sources[g[0]]], [texts[i] for i in g], options)
                for g in groups
            )
        )
        out: list[list[Translation]] = [[] for _ in texts]
        for members, answers in zip(groups, found, strict=True):
            for i, answer in zip(members, answers, strict=True):
                out[i] = answer
        return out

    async def _translate_legs(
        self, legs: list[Leg], texts: list[str], options: SearchOptions
    ) -> list[list[Translation]]:
        """``texts`` through each leg in turn, every leg but the last with ``between``'s
        options."""
        for pair, token in legs[:-1]:
            found = await self.translate(pair, texts, between(options), token)
            texts = [hyps[0].text for hyps in found]
        pair, token = legs[-1]
        return await self.translate(pair, texts, options, token)

    def detect(self, text: str) -> list[dict[str, Any]]:
        """``/detect``: the served languages, most likely first, with lingua's confidence."""
        return [
            {"confidence": value, "language": code}
            for code, value in self.identifier.confidences(text)
        ]

    def source_of(self, text: str, target: str) -> tuple[str, float]:
        """The source language of ``text`` for ``source: auto``, and the confidence in it: the
        most likely of the languages served toward ``target``, directly or through English
        (of every served source when none is: a multilingual model's target). One such language is
        taken as it is (with confidence 0 when lingua does not know it).

        Raises:
            BadRequest: when lingua finds none of the languages it knows among them in the
                text (digits only), or several could be meant and none is identified.
        """
        reach = [*self.pairs, *self.pivots]  # through English too
        sources = {s for s, t in reach if t == target} or {s for s, _ in self.pairs}
        for code, value in self.identifier.confidences(text):
            if code in sources and value > 0:
                return code, value
        if sources & set(self.identifier.codes.values()):  # lingua knows them, found none
            raise BadRequest(
                "no language identified in the text (digits or symbols only?); "
                "give the source language"
            )
        if len(sources) > 1:
            raise BadRequest(f"give the source language: {target} is served from {listed(sources)}")
        return next(iter(sources)), 0.0

    def route(self, source: str, target: str) -> tuple[Pair, str | None]:
        """The model for ``source`` -> ``target``, and the target token to give it (a
        multilingual model's ``>>fra<<`` for ``fra`` or ``>>fra<<``; None for its own target).

        Raises:
            BadRequest: when no served model translates this pair.
        """
        pair = self.pairs.get((source, target))
        if pair is not None:
            return pair, None
        from_source = [p for p in self.pairs.values() if p.source == source]
        if not from_source:
            served = {s for s, _ in self.pairs}
            raise BadRequest(
                f"{source} is not supported (this server translates from {listed(served)})"
            )
        token = target if target.startswith(">>") else f">>{target}<<"
        for pair in from_source:
            if pair.tokenizer.piece_id(token) is not None:
                return pair, token
        targets = {p.target for p in from_source}
        raise BadRequest(
            f"{target} is not supported (from {source} this server translates to {listed(targets)})"
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
            raise BadRequest(str(e)) from None
