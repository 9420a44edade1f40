"""OpenDocument text (.odt) and presentations (.odp), through odfpy.

Every paragraph and heading (``text:p``, ``text:h``) is a segment, wherever it is: the body,
tables, frames and text boxes, a slide's shapes and its notes, footnotes, and the master
pages' headers and footers. Its text nodes, inside spans and links, are its runs; spaces,
tabs and line breaks written as elements (``text:s``, ``text:tab``, ``text:line-break``)
stay, and a note's citation number is kept. A paragraph inside a paragraph (a footnote's
body, a text box) is a segment of its own.
"""

from __future__ import annotations

import io
from collections.abc import Iterator

from odf.element import Element, Node
from odf.namespaces import DRAWNS, TEXTNS
from odf.opendocument import load

from aiayn.text.documents.base import (
    DocumentError,
    Limits,
    Run,
    RunDocument,
    check_package,
    reading,
    with_article,
)

_PARAGRAPHS = frozenset({(TEXTNS, "p"), (TEXTNS, "h")})
_KEPT = frozenset({(TEXTNS, "note-citation"), (TEXTNS, "tracked-changes")})
MAX_SPACES = 1_000  # a text:s repeat count read as at most this many spaces: a count is no size
_SPACES = {(TEXTNS, "s"): " ", (TEXTNS, "tab"): "\t", (TEXTNS, "line-break"): "\n"}
_MIMETYPES = {
    "application/vnd.oasis.opendocument.text": "OpenDocument text",
    "application/vnd.oasis.opendocument.presentation": "OpenDocument presentation",
    "application/vnd.oasis.opendocument.spreadsheet": "OpenDocument spreadsheet",
}


def read_odt(data: bytes, what: str, limits: Limits) -> RunDocument:
    """An OpenDocument text (module docstring)."""
    return _read(data, what, limits, "application/vnd.oasis.opendocument.text")


def read_odp(data: bytes, what: str, limits: Limits) -> RunDocument:
    """An OpenDocument presentation, its slides and notes (module docstring)."""
    return _read(data, what, limits, "application/vnd.oasis.opendocument.presentation")


def _read(data: bytes, what: str, limits: Limits, mimetype: str) -> RunDocument:
    kind = _MIMETYPES[mimetype]
    package = check_package(data, what, limits, needs="content.xml", kind=kind)
    with reading(what, kind):
        names = set(package.namelist())
        found = package.read("mimetype") if "mimetype" in names else b""
    found = found.decode("ascii", "replace").strip()
    if found != mimetype:
        named = with_article(_MIMETYPES[found]) if found in _MIMETYPES else found or "no mimetype"
        raise DocumentError(f"{what}: not {with_article(kind)} (it is {named})")
    with reading(what, kind):
        document = load(io.BytesIO(data))
        slides = sum(1 for _ in _elements(document.body, {(DRAWNS, "page")}))
        limits.check(what, slides, limits.max_parts, "slides")
        segments = []
        for root in (document.body, document.masterstyles):
            for paragraph in _elements(root, _PARAGRAPHS):
                segments += _segments(paragraph)
    return RunDocument(segments, lambda: _saved(document), what=what, limits=limits)


def _elements(root: Element, names: set | frozenset) -> Iterator[Element]:
    """The elements named ``names`` under ``root`` in document order, not those inside one
    of them (iterative: a deeply nested file does not exhaust the stack)."""
    stack = [iter(root.childNodes)]
    while stack:
        child = next(stack[-1], None)
        if child is None:
            stack.pop()
        elif child.nodeType == Node.ELEMENT_NODE:
            if child.qname in names:
                yield child
            else:
                stack.append(iter(child.childNodes))


def _segments(paragraph: Element) -> list[list[Run]]:
    """The paragraph's runs, then each paragraph inside it as a segment of its own."""
    runs: list[Run] = []
    inner: list[list[Run]] = []
    stack = list(reversed(paragraph.childNodes))
    while stack:
        node = stack.pop()
        if node.nodeType == Node.TEXT_NODE:
            runs.append(Run(node.data, _put(node)))
        elif node.nodeType != Node.ELEMENT_NODE or node.qname in _KEPT:
            continue
        elif node.qname in _SPACES:
            count = int(node.getAttrNS(TEXTNS, "c") or 1) if node.qname == (TEXTNS, "s") else 1
            count = min(count, MAX_SPACES)  # the element itself is written back unchanged
            runs.append(Run(_SPACES[node.qname] * count, _kept))
        elif node.qname in _PARAGRAPHS:
            inner += _segments(node)
        else:
            stack += reversed(node.childNodes)
    return [runs, *inner]


def _put(node):
    def put(text: str) -> None:
        node.data = text

    return put


def _kept(_: str) -> None:
    return None


def _saved(document) -> bytes:
    out = io.BytesIO()
    document.save(out)
    return out.getvalue()
