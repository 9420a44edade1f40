"""EPUB e-books: ebooklib reads the package and names its content documents and its
navigation document (the table of contents); each is translated as an HTML page
(``aiayn.text.html``, all in one call), and the book is written back member by member with
``zipfile``: the package document, EPUB 2's NCX, styles, fonts and pictures are copied as
they were (ebooklib's own writer rebuilds them, and cannot write every book it reads), the
``mimetype`` member first and stored, as EPUB requires."""

from __future__ import annotations

import io
import zipfile
from collections.abc import Sequence

import ebooklib
from ebooklib import epub

from aiayn.text.documents.base import DocumentError, Limits, check_package, decoded, reading
from aiayn.text.html import HtmlText

KIND = "EPUB e-book"
_PAGES = (".xhtml", ".html", ".htm")  # content and navigation documents (not EPUB 2's NCX)


class EpubDocument:
    """An e-book's chapters as one list of ``texts``; ``render`` writes the book back."""

    def __init__(self, data: bytes, chapters: dict[str, HtmlText]):
        self._data = data
        self._chapters = chapters
        self.texts = [text for page in chapters.values() for text in page.texts]

    def render(self, translations: Sequence[str]) -> bytes:
        if len(translations) != len(self.texts):
            raise ValueError(f"{len(translations)} translations for {len(self.texts)} texts")
        pages, start = {}, 0
        for name, page in self._chapters.items():
            end = start + len(page.texts)
            pages[name] = page.render(translations[start:end]).encode("utf-8")
            start = end
        out = io.BytesIO()
        with (
            zipfile.ZipFile(io.BytesIO(self._data)) as source,
            zipfile.ZipFile(out, "w") as book,
        ):
            for member in source.infolist():  # in order: mimetype stays first
                book.writestr(member, pages.get(member.filename) or source.read(member))
        return out.getvalue()


def read_epub(data: bytes, what: str, limits: Limits) -> EpubDocument:
    """An e-book's content documents (module docstring)."""
    package = check_package(data, what, limits, needs="META-INF/container.xml", kind=KIND)
    names = package.namelist()
    with reading(what, KIND):
        book = epub.read_epub(io.BytesIO(data), {"ignore_ncx": True})
        items = [
            *book.get_items_of_type(ebooklib.ITEM_DOCUMENT),
            *book.get_items_of_type(ebooklib.ITEM_NAVIGATION),
        ]
        items = [item for item in items if item.file_name.lower().endswith(_PAGES)]
    limits.check(what, len(items), limits.max_parts, "chapters")
    chapters = {}
    for item in items:
        member = _member(names, item.file_name, what)
        chapters[member] = HtmlText(decoded(package.read(member), f"{what}: {member}"))
    document = EpubDocument(data, chapters)
    limits.check(what, len(document.texts), limits.max_segments, "texts to translate")
    return document


def _member(names: list[str], file_name: str, what: str) -> str:
    """The package member of a manifest item (its path is relative to the package
    document's folder)."""
    found = [n for n in names if n == file_name or n.endswith(f"/{file_name}")]
    if len(found) != 1:
        raise DocumentError(f"{what}: the manifest's {file_name} is not one file of the book")
    return found[0]
