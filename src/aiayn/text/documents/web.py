"""HTML pages (.html, .htm, .xhtml): the rule of ``aiayn.text.html`` over a whole file."""

from __future__ import annotations

from collections.abc import Sequence

from aiayn.text.documents.base import DocumentError, Limits, decoded
from aiayn.text.html import HtmlError, HtmlText


class HtmlDocument:
    """An HTML page's segments (``texts``) and the page, UTF-8, with their translations."""

    def __init__(self, page: HtmlText):
        self._page = page
        self.texts = page.texts

    def render(self, translations: Sequence[str]) -> bytes:
        return self._page.render(translations).encode("utf-8")


def read_html(data: bytes, what: str, limits: Limits) -> HtmlDocument:
    """An HTML page (UTF-8) as segments.

    Raises:
        DocumentError: not UTF-8, or HTML nested too deep or with too many elements.
    """
    try:
        page = HtmlText(decoded(data, what))
    except HtmlError as e:
        raise DocumentError(f"{what}: {e}") from None
    limits.check(what, len(page.texts), limits.max_segments, "texts to translate")
    return HtmlDocument(page)
