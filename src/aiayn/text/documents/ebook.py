"""EPUB e-books: ebooklib reads the package and names its content documents and its
navigation document (the table of contents); each is translated as an HTML page
(``aiayn.text.html``, all in one call), and so are the book's titles (the package
document's ``dc:title``) and EPUB 2's table of contents (the NCX's title and labels), and
``dc:language`` names the target language. The book is written back member by member with
``zipfile``: styles, fonts, pictures and every other element are copied as they were
(ebooklib's own writer rebuilds them, and cannot write every book it reads), the
``mimetype`` member first and stored, as EPUB requires."""

from __future__ import annotations

import io
import zipfile
from collections.abc import Sequence
from typing import Any

import ebooklib
from ebooklib import epub

from aiayn.text.documents.base import DocumentError, Limits, check_package, decoded, reading
from aiayn.text.html import HtmlText
from aiayn.text.runs import has_word

KIND = "EPUB e-book"
_PAGES = (".xhtml", ".html", ".htm")  # content and navigation documents (not EPUB 2's NCX)


DC = "{http://purl.org/dc/elements/1.1/}"
NCX = "{http://www.daisy.org/z3986/2005/ncx/}"


class EpubDocument:
    """An e-book's chapters, titles and labels as one list of ``texts``; ``render`` writes
    the book back (``language``: what its ``dc:language`` says, when set)."""

    def __init__(self, data: bytes, chapters: dict[str, HtmlText], labels: dict[str, Any]):
        self._data = data
        self._chapters = chapters
        self._labels = labels  # member -> its XML tree, whose label elements are translated
        self._elements = [e for tree in labels.values() for e in _label_elements(tree)]
        self.language: str | None = None
        self.texts = [text for page in chapters.values() for text in page.texts]
        self.texts += [e.text.strip() for e in self._elements]

    def render(self, translations: Sequence[str]) -> bytes:
        if len(translations) != len(self.texts):
            raise ValueError(f"{len(translations)} translations for {len(self.texts)} texts")
        pages, start = {}, 0
        for name, page in self._chapters.items():
            end = start + len(page.texts)
            pages[name] = page.render(translations[start:end]).encode("utf-8")
            start = end
        pages |= self._labelled(translations[start:])
        out = io.BytesIO()
        with (
            zipfile.ZipFile(io.BytesIO(self._data)) as source,
            zipfile.ZipFile(out, "w") as book,
        ):
            for member in source.infolist():  # in order: mimetype stays first
                book.writestr(member, pages.get(member.filename) or source.read(member))
        return out.getvalue()

    def _labelled(self, translations: Sequence[str]) -> dict[str, bytes]:
        """The package document and NCX with their titles and labels translated, and the
        package's ``dc:language`` the target's."""
        from lxml import etree

        for element, translation in zip(self._elements, translations, strict=True):
            element.text = translation
        for tree in self._labels.values() if self.language else ():
            for language in tree.iter(f"{DC}language"):
                language.text = self.language
        return {
            name: etree.tostring(tree, xml_declaration=True, encoding="utf-8")
            for name, tree in self._labels.items()
        }


def _label_elements(tree: Any) -> list[Any]:
    """The elements of a package document or NCX whose text is a title or a label."""
    found = [*tree.iter(f"{DC}title"), *tree.iter(f"{NCX}text")]
    return [e for e in found if e.text and has_word(e.text)]


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
    document = EpubDocument(data, chapters, _label_trees(package, names, what))
    limits.check(what, len(document.texts), limits.max_segments, "texts to translate")
    return document


def _label_trees(package: zipfile.ZipFile, names: list[str], what: str) -> dict[str, Any]:
    """The package documents and NCX files of the book, parsed (their entities were
    refused by ``check_package``)."""
    from lxml import etree

    parser = etree.XMLParser(resolve_entities=False, no_network=True)
    trees = {}
    for name in names:
        if name.lower().endswith((".opf", ".ncx")):
            with reading(what, KIND):
                trees[name] = etree.fromstring(package.read(name), parser).getroottree()
    return trees


def _member(names: list[str], file_name: str, what: str) -> str:
    """The package member of a manifest item (its path is relative to the package
    document's folder)."""
    found = [n for n in names if n == file_name or n.endswith(f"/{file_name}")]
    if len(found) != 1:
        raise DocumentError(f"{what}: the manifest's {file_name} is not one file of the book")
    return found[0]
