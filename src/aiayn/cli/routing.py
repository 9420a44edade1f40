"""``aiayn translate`` with several models (``--model`` repeated, ``--target``): each line
goes to the model of its source language (``--source``, or ``--source auto``: found for each
line on its own by lingua, among the languages translated to ``--target``) and through
English where no model of the pair is given (two decodes, the first one's best translation
given to the second; a direct model wins), as ``aiayn serve`` routes requests."""

from __future__ import annotations

import dataclasses
from collections import Counter
from collections.abc import Sequence
from typing import TYPE_CHECKING

from aiayn.cli.common import UsageError
from aiayn.text.documents import Limits, translate_document

if TYPE_CHECKING:  # aiayn --help starts without torch
    from aiayn.decode.translator import Translation, Translator
    from aiayn.search_options import SearchOptions

PIVOT = "en"


class RoutedTranslator:
    """Several translators behind ``Translator``'s ``translate`` / ``translate_document`` /
    ``check``, for one target language."""

    def __init__(self, translators: Sequence[Translator], source: str, target: str):
        self.direct: dict[tuple[str, str], Translator] = {}
        for translator in translators:
            pair = (translator.src_lang, translator.tgt_lang)
            if not all(pair):
                raise UsageError("with several --model, each model directory must name its pair")
            if pair in self.direct:
                raise UsageError(f"two models for {pair[0]}-{pair[1]}")
            self.direct[pair] = translator
        self.source, self.target = source, target
        self.sources = [s for s in dict.fromkeys(s for s, _ in self.direct) if self._plan(s)]
        if source != "auto" and source not in self.sources:
            raise UsageError(f"no model, nor two through {PIVOT}, for {source}-{target}")
        if not self.sources:
            raise UsageError(f"no model translates to {target}")
        self.tgt_lang, self.pretokenized = target, self._plan(self.sources[0])[-1].pretokenized
        self._identifier = None

    def _plan(self, source: str) -> list[Translator]:
        if (source, self.target) in self.direct:
            return [self.direct[source, self.target]]
        first, second = self.direct.get((source, PIVOT)), self.direct.get((PIVOT, self.target))
        return [first, second] if first and second and source != self.target else []

    def check(self, options: SearchOptions) -> None:
        for translator in self.direct.values():
            translator.check(options)

    def languages(self, lines: Sequence[str]) -> list[str]:
        """Each line's source language: ``--source``, or found for each line on its own (a
        line without a letter takes the most common language of the others)."""
        if self.source != "auto" or len(self.sources) == 1:
            return [self.source if self.source != "auto" else self.sources[0]] * len(lines)
        if self._identifier is None:
            try:
                from aiayn.serve.detect import LanguageIdentifier
            except ImportError:
                raise UsageError(
                    "--source auto needs lingua (pip install 'aiayn[serve]')"
                ) from None
            self._identifier = LanguageIdentifier(self.sources)
        found = [self._detect(line) if any(c.isalpha() for c in line) else "" for line in lines]
        common = Counter(f for f in found if f).most_common(1)
        fallback = common[0][0] if common else self.sources[0]
        return [f or fallback for f in found]

    def _detect(self, line: str) -> str:
        ranked = self._identifier.confidences(line)
        return ranked[0][0] if ranked else self.sources[0]

    def translate(
        self, lines: list[str], options: SearchOptions, *, warn, target_token=None
    ) -> list[list[Translation]]:
        """Each line by the model(s) of its source language, in input order."""
        languages = self.languages(lines)
        out: list[list[Translation]] = [[] for _ in lines]
        for source in dict.fromkeys(languages):
            members = [i for i, language in enumerate(languages) if language == source]
            found = self._through(source, [lines[i] for i in members], options, warn, target_token)
            for i, answer in zip(members, found, strict=True):
                out[i] = answer
        return out

    def _through(self, source, texts, options, warn, target_token) -> list[list[Translation]]:
        plan = self._plan(source)
        between = dataclasses.replace(options, nbest=1, glossary=None, min_confidence=0.0)
        for translator in plan[:-1]:
            texts = [h[0].text for h in translator.translate(texts, between, warn=warn)]
        return plan[-1].translate(texts, options, warn=warn, target_token=target_token)

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
    ) -> bytes:
        """A document, its language found on all its text together (``--source auto``)."""
        text_options = dataclasses.replace(options, nbest=1, format="text")

        def translate(texts: list[str]) -> list[str]:
            source = self.languages(["\n".join(texts)])[0]
            found = self._through(source, texts, text_options, warn, target_token)
            return [hyps[0].text for hyps in found]

        return translate_document(data, format, translate, what=what, limits=limits)
