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

from bs4 import BeautifulSoup, NavigableString, Tag

from aiayn.errors import AiaynError
from aiayn.text.runs import deal, has_word, segment_text

BLOCKS = frozenset(
    {"address", "article", "aside", "blockquote", "body", "caption", "dd", "details", "div"}
    | {"dl", "dt", "fieldset", "figcaption", "figure", "footer", "form", "header", "hr", "html"}
    | {"h1", "h2", "h3", "h4", "h5", "h6", "li", "main", "nav", "ol", "p", "section", "summary"}
    | {"table", "tbody", "td", "tfoot", "th", "thead", "tr", "ul"}
)
KEPT_TAGS = frozenset(["code", "pre", "kbd", "samp", "script", "style", "textarea", "template"])
KEPT_CLASSES = frozenset({"notranslate", "h-card", "mention", "hashtag"})
MAX_DEPTH = 256  # elements nested in one another at most (browsers stop at 512)
MAX_ELEMENTS = 100_000  # elements in one document at most
_URL = re.compile(r"^(https?://|www\.|[#@])", re.IGNORECASE)
_TAG = re.compile(r"<[^<>!?]+>")  # an opening or closing tag (not a comment or a declaration)
# in a tag: its name or an attribute's, as the source spells it (``linearGradient``, ``viewBox``)
_NAME = re.compile(r"^</?([A-Za-z][\w:.-]*)|\s([A-Za-z][\w:.-]*)\s*=")


class HtmlError(AiaynError, ValueError):
    """HTML too deep or too large to translate (``MAX_DEPTH``, ``MAX_ELEMENTS``)."""


class HtmlText:
    """An HTML document's segments to translate (``texts``) and the document with their
    translations in place (``render``); see the module docstring."""

    def __init__(self, html: str):
        self._soup = BeautifulSoup(html, "html.parser")
        # the parser lower-cases names; XHTML's SVG and MathML spell some in mixed case
        names = (n for tag in _TAG.findall(html) for m in _NAME.findall(tag) for n in m if n)
        self._cased = {n.lower(): n for n in names if n != n.lower()}
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
        if self._cased:
            _restore_case(self._soup, self._cased)
        return self._soup.decode(formatter="minimal")


def _restore_case(soup: BeautifulSoup, cased: dict[str, str]) -> None:
    """Tag and attribute names back in the source's own spelling (``viewBox``, not
    ``viewbox``: SVG in an XHTML page, an e-book's chapter, is case-sensitive)."""
    for tag in soup.find_all(True):
        tag.name = cased.get(tag.name, tag.name)
        if any(name in cased for name in tag.attrs):
            tag.attrs = {cased.get(name, name): value for name, value in tag.attrs.items()}


def translate_html(html: str, translate: Callable[[list[str]], list[str]]) -> str:
    """``html`` with the text of each segment replaced by its translation (module
    docstring); ``translate`` takes and returns plain texts, one per segment."""
    document = HtmlText(html)
    return document.render(translate(document.texts) if document.texts else [])


def _collect(root: Tag, segments: list[list[NavigableString]]) -> None:
    """Deal ``root``'s text nodes into segments (module docstring), walking the tree with a
    stack of its own: no recursion, so depth is bounded by ``MAX_DEPTH``, not by Python's
    stack.

    Raises:
        HtmlError: deeper than ``MAX_DEPTH`` or more than ``MAX_ELEMENTS`` elements.
    """
    # items: a text node, (an element, its depth), or CUT (a segment ends here)
    stack: list[NavigableString | tuple[Tag, int] | None] = [(root, 0)]
    elements = 0
    while stack:
        item = stack.pop()
        if item is CUT:
            segments.append([])
        elif isinstance(item, NavigableString):
            segments[-1].append(item)
        else:
            node, depth = item
            children = [c for c in node.children if _walked(c)]
            elements += sum(isinstance(c, Tag) for c in children)
            if elements > MAX_ELEMENTS:
                raise HtmlError(f"HTML with more than {MAX_ELEMENTS:,} elements")
            if depth >= MAX_DEPTH and any(isinstance(c, Tag) for c in children):
                raise HtmlError(f"HTML nested deeper than {MAX_DEPTH} elements")
            for child in reversed(children):  # popped in document order
                stack.extend(_visit(child, depth + 1))


CUT = None  # on the walk's stack: the current segment ends


def _walked(node: object) -> bool:
    """Text nodes (not comments, CData, doctypes, ...) and elements."""
    return type(node) is NavigableString or isinstance(node, Tag)


def _visit(node: NavigableString | Tag, depth: int) -> list:
    """What goes on the walk's stack for ``node`` (in reverse: the last is taken first)."""
    if isinstance(node, NavigableString):
        return [node]
    if _kept(node) or node.name == "br":
        return [CUT]
    if node.name in BLOCKS:
        return [CUT, (node, depth), CUT]
    return [(node, depth)]


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
