"""Whole documents in, the same documents translated out: Word, PowerPoint, OpenDocument
text and presentations, EPUB e-books, HTML pages, SubRip and WebVTT subtitles, Markdown, and
an application's localisation files (PO, XLIFF, JSON, ARB, YAML, Android strings, Java
properties: ``catalogue``).

Each format is read by a well-kept library (``aiayn[documents]``), never by hand: the
document becomes *segments* (paragraphs, table cells, headers and footers, slide notes,
cues), each translated as one text whose translation is dealt back to the runs of
formatting it spans (``aiayn.text.runs``, the rule of ``aiayn.text.html``); everything else
(styles, tables, pictures, links' targets, timings, code) is written back as it was. Pure
text: no torch; ``translate`` is any function from texts to their translations.

    >>> from aiayn.text.documents import translate_document
    >>> upper = lambda texts: [t.upper() for t in texts]
    >>> translate_document(b"1\\n00:00:01,000 --> 00:00:02,000\\nHello!\\n", "srt", upper)
    b'1\\n00:00:01,000 --> 00:00:02,000\\nHELLO!\\n\\n'
"""

from __future__ import annotations

import importlib
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import PurePath
from typing import NamedTuple, Protocol

from aiayn.text.documents.base import (
    DEFAULT_LIMITS,
    DocumentError,
    DocumentTooLarge,
    Limits,
    counted,
)
from aiayn.text.documents.catalogue import Catalogue

__all__ = [
    "FORMATS",
    "Document",
    "DocumentError",
    "DocumentTooLarge",
    "Format",
    "Limits",
    "Translated",
    "each_once",
    "ending_as_sources",
    "for_each",
    "format_for",
    "read_document",
    "render",
    "translate_document",
]


class Document(Protocol):
    """A document read for translation: its ``texts`` and the document with their
    translations in place (``render``, once)."""

    texts: list[str]

    def render(self, translations: Sequence[str]) -> bytes: ...


class Translated(NamedTuple):
    """A text's translation, and whether its confidence is too low (``review``): a
    localisation file marks it for review, a document keeps the source text instead."""

    text: str
    review: bool = False


@dataclass(frozen=True)
class Format:
    """A document format: its name, file suffixes, media type and reader
    (``module:function``, taking the bytes, a name for messages and the ``Limits``; a
    localisation file's: ``catalogue:KIND``, a kind of ``catalogue.KINDS``)."""

    name: str
    suffixes: tuple[str, ...]
    media_type: str
    reader: str

    @property
    def localisation(self) -> bool:
        """Whether the format is an application's message catalogue."""
        return self.reader.startswith("catalogue:")


_OOXML = "application/vnd.openxmlformats-officedocument"
_ODF = "application/vnd.oasis.opendocument"
FORMATS = {
    f.name: f
    for f in (
        Format("docx", (".docx",), f"{_OOXML}.wordprocessingml.document", "office:read_docx"),
        Format("pptx", (".pptx",), f"{_OOXML}.presentationml.presentation", "office:read_pptx"),
        Format("odt", (".odt",), f"{_ODF}.text", "opendocument:read_odt"),
        Format("odp", (".odp",), f"{_ODF}.presentation", "opendocument:read_odp"),
        Format("epub", (".epub",), "application/epub+zip", "ebook:read_epub"),
        Format("html", (".html", ".htm", ".xhtml"), "text/html; charset=utf-8", "web:read_html"),
        Format("srt", (".srt",), "application/x-subrip; charset=utf-8", "subtitles:read_srt"),
        Format("vtt", (".vtt",), "text/vtt; charset=utf-8", "subtitles:read_vtt"),
        Format(
            "markdown",
            (".md", ".markdown"),
            "text/markdown; charset=utf-8",
            "markdown:read_markdown",
        ),
        Format("po", (".po", ".pot"), "text/x-gettext-translation; charset=utf-8", "catalogue:po"),
        Format("xliff", (".xlf", ".xliff"), "application/xliff+xml", "catalogue:xliff"),
        Format("json", (".json",), "application/json", "catalogue:json"),
        Format("arb", (".arb",), "application/json", "catalogue:arb"),
        Format("yaml", (".yml", ".yaml"), "application/yaml; charset=utf-8", "catalogue:yaml"),
        Format("android", (".xml",), "application/xml", "catalogue:android"),
        Format("properties", (".properties",), "text/x-java-properties", "catalogue:properties"),
    )
}
L10N = "translate-toolkit babel ruamel.yaml"  # the localisation formats' libraries


def format_for(filename: str) -> Format | None:
    """The format a file's suffix names (case aside); None for any other suffix."""
    suffix = PurePath(filename).suffix.lower()
    return next((f for f in FORMATS.values() if suffix in f.suffixes), None)


def read_document(
    data: bytes,
    format: str,
    *,
    what: str = "document",
    limits: Limits = DEFAULT_LIMITS,
    retranslate: bool = False,
) -> Document:
    """``data`` read as a ``format`` document (a name in ``FORMATS``); ``what`` names it in
    errors (a file name). A localisation file's units that hold a translation already are
    kept as they are, unless ``retranslate``.

    Raises:
        DocumentError: an unknown format, a document that is broken, hostile or of another
            format, or the format's library not installed.
        DocumentTooLarge: a document over ``limits``.
    """
    if format not in FORMATS:
        raise DocumentError(f"{what}: unknown document format {format!r} ({', '.join(FORMATS)})")
    if not isinstance(data, bytes | bytearray | memoryview):
        raise DocumentError(
            f"{what}: a document is given as bytes (open its file with 'rb'), "
            f"not {type(data).__name__}"
        )
    limits.check(what, len(data), limits.max_bytes, "bytes")
    module, function = FORMATS[format].reader.split(":")
    extra = "l10n" if FORMATS[format].localisation else "documents"
    try:
        reader = importlib.import_module(f"aiayn.text.documents.{module}")
        if extra == "l10n":
            importlib.import_module("translate.storage.base")
            kind = reader.KINDS[function]
            return reader.read_catalogue(data, what, limits, kind, retranslate=retranslate)
    except ImportError as e:
        raise DocumentError(
            f"{what}: {format} files need {e.name} (pip install 'aiayn[{extra}]')"
        ) from None
    return getattr(reader, function)(data, what, limits)


def translate_document(
    data: bytes,
    format: str,
    translate: Callable[[list[str]], Sequence[str | Translated]],
    *,
    what: str = "document",
    limits: Limits = DEFAULT_LIMITS,
    retranslate: bool = False,
    target: str | None = None,
    report: Callable[[str], None] | None = None,
) -> bytes:
    """``data`` (a ``format`` document) with its texts translated by ``translate`` (all in
    one call; not called when the document has no text); see ``read_document``.

    A translation to ``review`` is written as such in a localisation file and replaced by
    its source in a document. A localisation file takes ``target``, its language's code,
    for its plural forms and its header; ``report`` gets its one-line summary.
    """
    document = read_document(data, format, what=what, limits=limits, retranslate=retranslate)
    if not document.texts:
        return render(document, [], what=what, target=target, report=report)
    found = each_once(translate, document.texts)
    return render(document, found, what=what, target=target, report=report)


def each_once(
    translate: Callable[[list[str]], Sequence[str | Translated]], texts: list[str]
) -> list[Translated]:
    """``translate`` of ``texts``, each distinct text translated once (a catalogue's
    repeated strings, a document's repeated cells)."""
    once = list(dict.fromkeys(texts))
    return for_each(texts, once, translate(once))


def for_each(
    texts: Sequence[str], once: Sequence[str], found: Sequence[str | Translated]
) -> list[Translated]:
    """The translation of each of ``texts``, from ``found``, those of the distinct ``once``."""
    if len(found) != len(once):
        raise ValueError(f"{len(found)} translations for {len(once)} texts")
    pairs = zip(once, found, strict=True)
    by_text = {t: Translated(f) if isinstance(f, str) else f for t, f in pairs}
    return [by_text[t] for t in texts]


def render(
    document: Document,
    found: Sequence[Translated],
    *,
    what: str = "document",
    target: str | None = None,
    report: Callable[[str], None] | None = None,
) -> bytes:
    """``document`` with its ``found`` translations in place (see ``translate_document``);
    ``report`` gets its summary line."""
    texts = [t.text for t in found]
    if isinstance(document, Catalogue):
        out = document.render(
            ending_as_sources(document.texts, texts),
            review=[t.review for t in found],
            target=target,
        )
        summary = document.summary
    else:
        kept = [s if t.review else t.text for s, t in zip(document.texts, found, strict=True)]
        if target and hasattr(document, "language"):  # one that names its language (EPUB)
            document.language = target
        out = document.render(ending_as_sources(document.texts, kept))
        summary = f"{what}: {document_summary(document.texts, found)}"
    if report is not None:
        report(summary)
    return out


def document_summary(texts: Sequence[str], found: Sequence[Translated]) -> str:
    """How many of a document's texts were translated, and which kept their source (a
    translation less confident than the minimum asked for)."""
    kept = [text for text, t in zip(texts, found, strict=True) if t.review]
    line = f"{counted(len(texts) - len(kept), 'text')} translated"
    if kept:
        shown = "; ".join(repr(t if len(t) <= 40 else t[:39] + "…") for t in kept[:3])
        more = f"; and {len(kept) - 3} more" if len(kept) > 3 else ""
        line += f", {len(kept)} kept in their source (confidence below the minimum): {shown}{more}"
    return line


FINAL_STOP = re.compile(r"(?<![.…])\.\s*$")  # one full stop at the end, not an ellipsis's
SENTENCE_END = re.compile(r"[.!?…:;。！？]\s*$")


def ending_as_sources(sources: list[str], translations: list[str]) -> list[str]:
    """Each translation without the full stop a model adds where its source (a heading, a
    table cell, a list item, a caption) ends without one."""
    return [
        FINAL_STOP.sub("", translation) if not SENTENCE_END.search(source) else translation
        for source, translation in zip(sources, translations, strict=True)
    ]
