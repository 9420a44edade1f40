"""Language identification for ``/detect`` and ``source: auto``: lingua's detector, built only
over the languages the server serves (a smaller choice is faster, lighter in memory, and
never names a language no model here translates)."""

from __future__ import annotations

from collections.abc import Iterable

from lingua import IsoCode639_1, Language, LanguageDetectorBuilder


class LanguageIdentifier:
    """Which of a fixed set of languages (ISO 639-1 codes) a text is in."""

    def __init__(self, codes: Iterable[str]):
        known: dict[Language, str] = {}
        for code in dict.fromkeys(codes):
            language = _lingua_language(code)
            if language is not None:
                known[language] = code
        self.codes = known
        self._detector = LanguageDetectorBuilder.from_languages(*known).build() if known else None
        if self._detector is not None:
            self._detector.compute_language_confidence_values("warm up")  # loads its models

    def confidences(self, text: str) -> list[tuple[str, float]]:
        """(code, confidence from 0 to 100) for every known language, most likely first;
        empty when none of the languages is one lingua knows."""
        if self._detector is None:
            return []
        found = self._detector.compute_language_confidence_values(text)
        return [(self.codes[c.language], round(100.0 * c.value, 2)) for c in found]


def _lingua_language(code: str) -> Language | None:
    try:
        return Language.from_iso_code_639_1(IsoCode639_1.from_str(code.lower()))
    except ValueError:
        return None
