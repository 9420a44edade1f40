"""One routing for the CLI and the server: which models translate a pair, and each text's
source language when it is to be found.

A pair A -> B is translated by its own model; where none is given and A -> en and en -> B
are (Argos Translate's pivot), by the two in turn: the first one's best translation (no
glossary, no confidence floor: ``between``) is given to the second, which answers with the
request's options. A text's source language, for ``auto``, is found for each text on its own
(``detect_each``); a text without a letter (numbers, codes) takes the language most common
among the other texts, or where no text has a letter, the language of all of them together.
``RoutedTranslator`` does it for ``aiayn translate`` with several models;
``aiayn.serve.served`` for the server, asynchronously, one engine per model.
"""

from __future__ import annotations

import dataclasses
from collections import Counter
from collections.abc import Callable, Hashable, Mapping, Sequence
from typing import TYPE_CHECKING, TypeVar

from aiayn.errors import AiaynError
from aiayn.search_options import SearchOptions
from aiayn.text.documents import Limits
from aiayn.translate.document_texts import translated_document

if TYPE_CHECKING:  # aiayn --help starts without torch
    from aiayn.translate.translator import Translation, Translator

PIVOT = "en"  # the language pairs without a model of their own are bridged through

M = TypeVar("M")  # a model: a Translator, or a served pair
T = TypeVar("T")  # what a detection finds: a language, or a language with its confidence


class RoutingError(AiaynError):
    """Models that cannot route: a pair without a model, two models for one pair."""


def plan(direct: Mapping[tuple[str, str], M], source: str, target: str) -> list[M]:
    """The models that translate ``source`` -> ``target``: its own, else the two through
    ``PIVOT``; none when neither is given."""
    if (source, target) in direct:
        return [direct[source, target]]
    first, second = direct.get((source, PIVOT)), direct.get((PIVOT, target))
    return [first, second] if first and second and source not in (target, PIVOT) else []


def pivots(direct: Mapping[tuple[str, str], M]) -> dict[tuple[str, str], tuple[M, M]]:
    """Every pair translated through ``PIVOT``: A -> en and en -> B given, A -> B not."""
    sources = {s for s, _ in direct} | {t for _, t in direct}
    found = {}
    for source in sources:
        for target in sources:
            legs = plan(direct, source, target)
            if len(legs) == 2:
                found[source, target] = (legs[0], legs[1])
    return found


def between(options: SearchOptions) -> SearchOptions:
    """The options of every leg but the last: its best translation, no confidence floor
    (the last leg judges the whole), and the glossary's source terms kept verbatim as
    protected spans, so that the last leg finds them and imposes their target terms."""
    if options.glossary is None:
        return dataclasses.replace(options, nbest=1, min_confidence=0.0)
    patterns = (*options.protect_patterns, options.glossary.source_pattern)
    return dataclasses.replace(
        options, nbest=1, min_confidence=0.0, glossary=None, protect=True, protect_patterns=patterns
    )


def detect_each(
    texts: Sequence[str], detect: Callable[[str], T], language: Callable[[T], str] = str
) -> list[T]:
    """``detect(text)`` for each text with a letter; a text without one takes the finding
    of the language most common among the others (the first such finding), or where no text
    has a letter, ``detect`` of all the texts together. ``language`` reads a finding's
    language."""
    found: list[T | None] = [detect(t) if any(c.isalpha() for c in t) else None for t in texts]
    known = [f for f in found if f is not None]
    if len(known) == len(found):
        return known
    if known:
        common = Counter(language(f) for f in known).most_common(1)[0][0]
        fill = next(f for f in known if language(f) == common)
    else:
        fill = detect("\n".join(texts))
    return [fill if f is None else f for f in found]


def grouped(plans: Sequence[Sequence[Hashable]]) -> list[list[int]]:
    """The indices of the texts that share a plan (the same models in turn), each group in
    the texts' order: the texts of one plan are translated in one request."""
    groups: dict[tuple[int, ...], list[int]] = {}
    for i, legs in enumerate(plans):
        groups.setdefault(tuple(id(leg) for leg in legs), []).append(i)
    return list(groups.values())


class RoutedTranslator:
    """Several translators behind ``Translator``'s ``translate`` / ``translate_document`` /
    ``check``, for one target language (``aiayn translate --model A --model B --target``)."""

    def __init__(self, translators: Sequence[Translator], source: str, target: str):
        self.direct: dict[tuple[str, str], Translator] = {}
        for translator in translators:
            pair = (translator.src_lang, translator.tgt_lang)
            if not all(pair):
                raise RoutingError("with several models, each model directory must name its pair")
            if pair in self.direct:
                raise RoutingError(f"two models for {pair[0]}-{pair[1]}")
            self.direct[pair] = translator
        self.source, self.target = source, target
        self.sources = [s for s in dict.fromkeys(s for s, _ in self.direct) if self._plan(s)]
        if source != "auto" and source not in self.sources:
            raise RoutingError(f"no model, nor two through {PIVOT}, for {source}-{target}")
        if not self.sources:
            raise RoutingError(f"no model translates to {target}")
        self.tgt_lang, self.pretokenized = target, self._plan(self.sources[0])[-1].pretokenized
        self._identifier = None

    def _plan(self, source: str) -> list[Translator]:
        return plan(self.direct, source, self.target)

    def check(self, options: SearchOptions) -> None:
        for translator in self.direct.values():
            translator.check(options)

    def languages(self, lines: Sequence[str]) -> list[str]:
        """Each line's source language: the one given, or found (``detect_each``)."""
        if self.source != "auto" or len(self.sources) == 1:
            return [self.source if self.source != "auto" else self.sources[0]] * len(lines)
        if self._identifier is None:
            try:
                from aiayn.translate.detect import LanguageIdentifier
            except ImportError:
                raise RoutingError(
                    "finding the source language needs lingua (pip install 'aiayn[serve]')"
                ) from None
            self._identifier = LanguageIdentifier(self.sources)
        return detect_each(lines, self._detect)

    def _detect(self, line: str) -> str:
        ranked = self._identifier.confidences(line)
        return ranked[0][0] if ranked else self.sources[0]

    def translate(
        self, lines: list[str], options: SearchOptions, *, warn, target_token=None
    ) -> list[list[Translation]]:
        """Each line by the model(s) of its source language, in input order."""
        languages = self.languages(lines)
        out: list[list[Translation]] = [[] for _ in lines]
        for members in grouped([self._plan(language) for language in languages]):
            texts = [lines[i] for i in members]
            found = self._through(languages[members[0]], texts, options, warn, target_token)
            for i, answer in zip(members, found, strict=True):
                out[i] = answer
        return out

    def _through(self, source, texts, options, warn, target_token) -> list[list[Translation]]:
        legs = self._plan(source)
        for translator in legs[:-1]:
            texts = [h[0].text for h in translator.translate(texts, between(options), warn=warn)]
        return legs[-1].translate(texts, options, warn=warn, target_token=target_token)

    def translate_document(
        self,
        data: bytes,
        format: str,
        options: SearchOptions,
        *,
        what: str,
        limits: Limits,
        warn,
        target_token=None,
        target: str | None = None,
        report: Callable[[str], None] | None = None,
    ) -> bytes:
        """A document, its language found on all its text together (``auto``)."""

        def translate(texts: list[str], text_options: SearchOptions):
            source = self.languages(["\n".join(texts)])[0]
            return self._through(source, texts, text_options, warn, target_token)

        return translated_document(
            translate,
            data,
            format,
            options,
            what=what,
            limits=limits,
            target=target or self.target,
            report=report,
        )
