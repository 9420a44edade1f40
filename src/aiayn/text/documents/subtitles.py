"""Subtitles: SubRip (.srt, the ``srt`` package) and WebVTT (.vtt, ``webvtt-py``).

A cue is a segment: its lines are translated as one text and the translation is spread over
the same number of lines; its tags (``<i>``, ``<b>``, ``<v Speaker>``, ``<c.class>``) carry
the words at their place. Numbers, identifiers, timings, cue settings, styles and notes are
kept as they are.
"""

from __future__ import annotations

import html
import re

import srt
import webvtt

from aiayn.text.documents.base import Limits, Run, RunDocument, decoded, reading

_MARKUP = re.compile(r"(<[^>]*>|\n)")  # cue text: tags and line breaks are not translated
_SPACE_BEFORE_BREAK = re.compile(r"[ \t]+\n")


def read_srt(data: bytes, what: str, limits: Limits) -> RunDocument:
    """A SubRip file's cues (module docstring)."""
    text = decoded(data, what)
    with reading(what, "SubRip file"):
        cues = list(srt.parse(text))
    limits.check(what, len(cues), limits.max_parts, "cues")

    def setter(cue: srt.Subtitle):
        def put(content: str) -> None:
            cue.content = content

        return put

    segments = [_cue_runs(cue.content, setter(cue)) for cue in cues]
    return RunDocument(
        segments,
        lambda: srt.compose(cues, reindex=False).encode("utf-8"),
        what=what,
        limits=limits,
    )


def read_vtt(data: bytes, what: str, limits: Limits) -> RunDocument:
    """A WebVTT file's cues (module docstring)."""
    text = decoded(data, what)
    with reading(what, "WebVTT file"):
        captions = webvtt.from_string(text)
        cues = list(captions)
    limits.check(what, len(cues), limits.max_parts, "cues")

    def setter(cue):
        def put(content: str) -> None:
            cue.text = content

        return put

    segments = [_cue_runs(cue.raw_text, setter(cue), entities=True) for cue in cues]
    return RunDocument(segments, lambda: captions.content.encode("utf-8"), what=what, limits=limits)


def _cue_runs(content: str, write, *, entities: bool = False) -> list[Run]:
    """The text pieces between a cue's tags and line breaks, as runs; each ``put``
    writes the whole cue back through ``write``. A line break is a run of its own whose
    text joins the lines with a space and is never replaced. With ``entities`` (WebVTT's
    ``&amp;``, ``&lt;``, ``&gt;``, ``&nbsp;``), a run's text is what they stand for and
    its translation is written back escaped."""
    pieces = _MARKUP.split(content)
    shown = html.unescape if entities else str

    def piece_put(k: int):
        def put(text: str) -> None:
            pieces[k] = html.escape(text, quote=False) if entities else text
            write(_SPACE_BEFORE_BREAK.sub("\n", "".join(pieces)))

        return put

    def kept(_: str) -> None:
        return None

    runs = []
    for k, piece in enumerate(pieces):
        if piece == "\n":
            runs.append(Run("\n", kept))
        elif k % 2 == 0:  # text; odd pieces are tags
            runs.append(Run(shown(piece), piece_put(k)))
    return runs
