"""HTML in, HTML out (LibreTranslate's ``format: html``), parsed with BeautifulSoup.

The rule, in full:

- The text is cut into *segments* at the edges of block elements (``p``, ``div``, ``li``,
  headings, table cells, ...), at ``<br>``, and at *kept* elements. A segment is translated
  as one text (so a sentence that spans inline tags such as ``<a>``, ``<b>`` or ``<span>`` is
  one sentence), all segments of a document in one call.
- *Kept* elements are not translated and stay where they are: ``code``, ``pre``, ``kbd``,
  ``samp``, ``script``, ``style``, ``textarea``, ``translate="no"`` or class ``notranslate``,
  a link whose text is a URL or starts with ``#`` or ``@`` (hashtags and mentions), and
  Mastodon's ``h-card``, ``mention`` and ``hashtag`` classes.
- A segment without a letter or a digit (markup only, whitespace, punctuation) is left alone.
- Tags are carried by the text nodes they hold: the translation is dealt to the segment's
  text nodes by ``aiayn.text.runs`` (words in proportion to the words each node held),
  so an inline tag wraps the part of the translation at the position its text had.
- Entities are decoded once on reading and ``&``, ``<``, ``>`` escaped once on writing.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence

from bs4 import BeautifulSoup, Comment, NavigableString, Tag

from aiayn.text.runs import deal, has_word, segment_text

BLOCKS = frozenset(
    {"address", "article", "aside", "blockquote", "body", "caption", "dd", "details", "div"}
    | {"dl", "dt", "fieldset", "figcaption", "figure", "footer", "form", "header", "hr", "html"}
    | {"h1", "h2", "h3", "h4", "h5", "h6", "li", "main", "nav", "ol", "p", "section", "summary"}
    | {"table", "tbody", "td", "tfoot", "th", "thead", "tr", "ul"}
)
KEPT_TAGS = frozenset(["code", "pre", "kbd", "samp", "script", "style", "textarea", "template"])
KEPT_CLASSES = frozenset({"notranslate", "h-card", "mention", "hashtag"})
_URL = re.compile(r"^(https?://|www\.|[#@])", re.IGNORECASE)


class HtmlText:
    """An HTML document's segments to translate (``texts``) and the document with their
    translations in place (``render``); see the module docstring."""

    def __init__(self, html: str):
        self._soup = BeautifulSoup(html, "html.parser")
        segments: list[list[NavigableString]] = [[]]
        _collect(self._soup, segments)
        self._segments = [s for s in segments if any(has_word(leaf) for leaf in s)]
        self.texts = [segment_text([str(leaf) for leaf in s]) for s in self._segments]

    def render(self, translations: Sequence[str]) -> str:
        """The document with segment ``i``'s text replaced by ``translations[i]`` (once)."""
        if len(translations) != len(self.texts):
            raise ValueError(f"{len(translations)} translations for {len(self.texts)} segments")
        for segment, translation in zip(self._segments, translations, strict=True):
            _deal(segment, translation)
        self._segments = []
        return self._soup.decode(formatter="minimal")


def translate_html(html: str, translate: Callable[[list[str]], list[str]]) -> str:
    """``html`` with the text of each segment replaced by its translation (module
    docstring); ``translate`` takes and returns plain texts, one per segment."""
    document = HtmlText(html)
    return document.render(translate(document.texts) if document.texts else [])


def _collect(node: Tag, segments: list[list[NavigableString]]) -> None:
    for child in list(node.children):
        if isinstance(child, Comment) or not isinstance(child, NavigableString | Tag):
            continue
        if isinstance(child, NavigableString):
            if type(child) is NavigableString:  # not a CData, Doctype, ...
                segments[-1].append(child)
            continue
        if _kept(child) or child.name == "br":
            segments.append([])
            continue
        block = child.name in BLOCKS
        if block:
            segments.append([])
        _collect(child, segments)
        if block:
            segments.append([])


def _kept(tag: Tag) -> bool:
    if tag.name in KEPT_TAGS or tag.get("translate") == "no":
        return True
    if KEPT_CLASSES & set(tag.get("class") or ()):
        return True
    return tag.name == "a" and bool(_URL.match(tag.get_text().strip()))


def _deal(segment: list[NavigableString], translation: str) -> None:
    """Put ``translation`` into the segment's nodes (``aiayn.text.runs.deal``)."""
    texts = [str(leaf) for leaf in segment]
    for leaf, old, new in zip(segment, texts, deal(texts, translation), strict=True):
        if new != old:
            leaf.replace_with(new)
