"""How a document's texts are translated, wherever it is translated (``Translator``, the
router, the server): one hypothesis of plain text each, localisation files' placeholders
always protected, and each translation's confidence compared with ``min_confidence`` by the
document (``aiayn.text.documents.render``), not by the search."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence

from aiayn.search_options import SearchOptions
from aiayn.text.documents import FORMATS, Limits, Translated, translate_document
from aiayn.text.documents.messages import PLACEHOLDERS
from aiayn.translate.terms import Translation


def document_options(options: SearchOptions, format: str) -> SearchOptions:
    """``options`` for a ``format`` document's texts: one plain-text hypothesis each, every
    confidence kept (``reviewed`` compares it), and in a localisation file every placeholder
    protected (printf, Python, ICU, i18next, Ruby, markup), whatever ``protect`` says."""
    options = dataclasses.replace(options, nbest=1, format="text", min_confidence=0.0)
    if format in FORMATS and FORMATS[format].localisation:
        patterns = tuple(dict.fromkeys((*options.protect_patterns, *PLACEHOLDERS)))
        options = dataclasses.replace(options, protect=True, protect_patterns=patterns)
    return options


def reviewed(found: Sequence[Sequence[Translation]], minimum: float) -> list[Translated]:
    """Each text's best translation, to review where its confidence is below ``minimum``."""
    return [Translated(hyps[0].text, hyps[0].confidence < minimum) for hyps in found]


def translated_document(
    translate: Callable[[list[str], SearchOptions], list[list[Translation]]],
    data: bytes,
    format: str,
    options: SearchOptions,
    *,
    what: str,
    limits: Limits,
    target: str | None,
    report: Callable[[str], None] | None,
) -> bytes:
    """``aiayn.text.documents.translate_document`` with ``translate`` (texts and their
    options to their translations): a localisation file in ``target``, its units below
    ``options.min_confidence`` to review, already translated ones kept unless
    ``options.retranslate``, its summary line given to ``report``."""
    text_options = document_options(options, format)
    return translate_document(
        data,
        format,
        lambda texts: reviewed(translate(texts, text_options), options.min_confidence),
        what=what,
        limits=limits,
        retranslate=options.retranslate,
        target=target,
        report=report,
    )
