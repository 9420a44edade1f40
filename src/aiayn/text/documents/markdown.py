"""Markdown (CommonMark with tables, strikethrough and front matter), parsed by
markdown-it-py (and mdit-py-plugins' front matter).

Only the text of paragraphs, headings, list items, quotes and table cells changes; every
other character of the file stays where it was (markers, indentation, link targets, code
blocks, HTML blocks, a YAML front matter between ``---`` lines). A paragraph, heading or
cell is a segment; its text pieces between emphasis and link markers are its runs, its line
breaks stay where they were. Inline code, inline HTML, autolinks and images are kept and cut
the segment there (the HTML rule of ``aiayn.text.html``). A text piece is found in the
source from the position of the one before it; translated text has Markdown's punctuation
escaped, so a translation never makes markup.
"""

from __future__ import annotations

import re
from collections.abc import Callable

from markdown_it import MarkdownIt
from markdown_it.token import Token
from mdit_py_plugins.front_matter import front_matter_plugin

from aiayn.text.documents.base import Limits, Run, RunDocument, decoded, reading

_KEPT = frozenset({"code_inline", "html_inline", "image"})
_BREAKS = frozenset({"softbreak", "hardbreak"})
_SPECIAL = re.compile(r"([\\`*_\[\]<>|])")


def read_markdown(data: bytes, what: str, limits: Limits) -> RunDocument:
    """A Markdown file's paragraphs, headings, list items, quotes and cells."""
    source = decoded(data, what)
    parser = (
        MarkdownIt("commonmark")
        .enable(["table", "strikethrough"])
        .disable("text_join")
        .use(front_matter_plugin)
    )
    with reading(what, "Markdown file"):
        tokens = parser.parse(source)
    starts = [0]
    for line in source.splitlines(keepends=True):
        starts.append(starts[-1] + len(line))
    edits: dict[int, tuple[int, str]] = {}  # start -> (end, new text)
    locate = _Locator(source)
    segments: list[list[Run]] = []
    for token in tokens:
        if token.type == "inline" and token.map is not None:
            locate.enter(starts[token.map[0]], starts[min(token.map[1], len(starts) - 1)])
            segments += _inline_segments(token.children or [], locate, edits)

    def save() -> bytes:
        out, at = [], 0
        for start in sorted(edits):
            end, text = edits[start]
            out += [source[at:start], text]
            at = end
        return "".join([*out, source[at:]]).encode("utf-8")

    return RunDocument(segments, save, what=what, limits=limits)


class _Locator:
    """Where each piece of inline text is in the source: searched from the end of the
    piece before it, within the lines of its block."""

    def __init__(self, source: str):
        self.source = source
        self.at = 0
        self.end = len(source)

    def enter(self, start: int, end: int) -> None:
        self.at = max(self.at, start)
        self.end = max(end, self.at)

    def find(self, text: str) -> int:
        """Where ``text`` starts (the search moves past it); -1 when it is not there."""
        if not text:
            return -1
        found = self.source.find(text, self.at, self.end)
        if found >= 0:
            self.at = found + len(text)
        return found

    def skip_past(self, text: str) -> None:
        found = self.source.find(text, self.at, self.end)
        if found >= 0:
            self.at = found + len(text)


def _inline_segments(
    children: list[Token], locate: _Locator, edits: dict[int, tuple[int, str]]
) -> list[list[Run]]:
    segments: list[list[Run]] = [[]]
    autolink = False
    for child in children:
        kind = child.type
        if kind == "link_open" and child.markup in ("autolink", "linkify"):
            autolink = True
            segments.append([])
        elif kind == "link_close" and autolink:
            autolink = False
            locate.skip_past(">")
        elif autolink:
            locate.find(child.content)
        elif kind in _BREAKS:
            segments[-1].append(Run("\n", _kept))
        elif kind in _KEPT:
            if kind == "image":
                locate.skip_past("]")
                _skip_target(locate, opened=True)
            else:
                locate.find(child.content)
            segments.append([])
        elif kind == "link_close":
            _skip_target(locate)
        elif kind in ("text", "text_special"):
            written = child.markup if kind == "text_special" else child.content
            start = locate.find(written)
            if start >= 0:
                segments[-1].append(Run(child.content, _edit(edits, start, len(written))))
    return segments


def _skip_target(locate: _Locator, *, opened: bool = False) -> None:
    """Past an inline link's ``](target "title")`` or a reference link's ``][label]``
    (``opened``: the search is already past the ``]``)."""
    at = locate.at - 1 if opened else locate.at  # the link text's closing bracket
    if locate.source.startswith("](", at):
        locate.skip_past(")")
    elif locate.source.startswith("][", at):
        locate.at = at + 2
        locate.skip_past("]")


def _edit(edits: dict[int, tuple[int, str]], start: int, length: int) -> Callable[[str], None]:
    def put(text: str) -> None:
        edits[start] = (start + length, _SPECIAL.sub(r"\\\1", text))

    return put


def _kept(_: str) -> None:
    return None
