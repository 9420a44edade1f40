"""Protected spans: placeholders, inline code, URLs, e-mail addresses and a user's own
patterns, kept verbatim and exactly once in a translation.

Each span of a sentence is replaced by a sentinel (a capital letter the sentence does not
hold, then numbers: words a translation model leaves as they are), the sentence is translated
(imposing every sentinel on the search is an option, ``SearchOptions.impose_spans``:
``aiayn.decode.constrained``), and each sentinel in the output is replaced by its span: the
first occurrence only, any copy dropped. A span whose sentinel the model left out goes where
it stood in the sentence, counted in words (its share of the words before it), before the
translation's final punctuation. So every span comes back exactly once. Patterns are matched
with ``regex`` under a time limit, so a user's pattern cannot stall a server.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache

import regex

from aiayn.errors import AiaynError

MATCH_SECONDS = 0.5  # one pattern over one sentence: longer is a runaway pattern, refused
TOTAL_SECONDS = 5.0  # every pattern over every sentence of one call (``Deadline``), at most

# Built-in kinds, tried together; where two overlap the leftmost, then the longest, wins.
BUILT_IN = {
    "double-brace placeholder": r"\{\{[^{}\n]*\}\}",  # {{name}}
    "shell variable": r"\$\{[^{}\n]*\}|\$[A-Za-z_][A-Za-z0-9_]*",  # ${HOME}, $HOME
    "brace placeholder": r"\{[^{}\n]*\}",  # {0}, {name}, {}
    "printf placeholder": r"%(?:\([^()\s]+\)|\d+\$)?[-#0+]*(?:\d+|\*)?(?:\.\d+)?"
    r"[diouxXeEfFgGcrsa@]",  # %s, %d, %(count)d, %1$s, %.2f
    "inline code": r"`[^`\n]+`",
    "URL": r"(?:(?:https?|ftp)://|www\.)[^\s<>\"]*[^\s<>\".,;:!?)\]']",
    "e-mail address": r"[A-Za-z0-9._%+-]+@[A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)*\.[A-Za-z]{2,}",
}
# What is left of a placeholder once the spans are out: an unbalanced one
UNBALANCED = regex.compile(r"\{\{|\}\}|\$\{|%\(|[{}]")
# One per span, in this order: capital letters a subword vocabulary holds as one piece,
# read as a name or a label, then numbers. A model that copies them copies them to where the
# span belongs; one that does not know them drops them and leaves the rest of the sentence
# as it was (Multi30k val, 304 lines with a span, BLEU of those lines against their clean
# translation's 40.48: K 40.48, B 40.52, Z 40.18, Y 39.88, first names 36.6-40.0, numbers
# 71-99 37.43, imposed 35.21).
SENTINELS = ("K", "B", "Z", "Y", "Q", *(str(n) for n in range(71, 100)))
FINAL_PUNCTUATION = regex.compile(r"[\s.!?…。！？]*$")


class ProtectError(AiaynError, ValueError):
    """A pattern that does not compile or runs away, or a sentence with an unbalanced
    placeholder; the message says which in one line."""


@dataclass(frozen=True)
class Span:
    """One protected span of a sentence and the sentinel that stands for it."""

    text: str
    sentinel: str
    tight: tuple[bool, bool] = (False, False)  # no space before / after it in the sentence
    at: float = 1.0  # the share of the sentence's other words that stand before it


@dataclass(frozen=True)
class Masked:
    """A sentence with its spans replaced by sentinels."""

    text: str
    spans: tuple[Span, ...]

    def restore(self, translation: str) -> str:
        """``translation`` with each sentinel replaced by its span, exactly once (the first
        occurrence; copies are dropped, the missing ones put where they stood in the
        sentence, in their order)."""
        missing = []
        for span in self.spans:
            if _word(span.sentinel).search(translation) is None:
                missing.append(span)
            else:
                translation = _put_back(translation, span)
        return _put_where_they_stood(translation, missing)


@lru_cache(maxsize=256)
def compile_patterns(patterns: tuple[str, ...]) -> tuple[regex.Pattern, ...]:
    """The built-in patterns and the user's ``patterns``, compiled.

    Raises:
        ProtectError: a pattern that is not a string, is empty or does not compile.
    """
    compiled = [regex.compile(p) for p in BUILT_IN.values()]
    for pattern in patterns:
        if not isinstance(pattern, str) or not pattern:
            raise ProtectError(f"protect pattern {pattern!r}: expected a non-empty regex")
        try:
            found = regex.compile(pattern)
        except (regex.error, ValueError, OverflowError) as e:
            raise ProtectError(f"protect pattern {pattern!r} does not compile: {e}") from None
        compiled.append(found)
    return tuple(compiled)


class Deadline:
    """The time the protect patterns of one call (a batch, a request) may take together:
    ``TOTAL_SECONDS`` from its start, so that many patterns, each under ``MATCH_SECONDS``
    on each sentence, cannot hold a decoder for minutes."""

    def __init__(self, seconds: float = TOTAL_SECONDS):
        self.seconds, self.end = seconds, time.monotonic() + seconds

    def left(self, where: str) -> float:
        """The seconds one pattern may take now: at most ``MATCH_SECONDS``.

        Raises:
            ProtectError: the call's time is spent.
        """
        left = self.end - time.monotonic()
        if left <= 0:
            raise ProtectError(
                f"{where}the protect patterns ran over {self.seconds:g}s in total (use fewer "
                "or simpler patterns)"
            )
        return min(MATCH_SECONDS, left)


def mask(
    sentence: str,
    patterns: Sequence[regex.Pattern],
    *,
    place: str = "",
    avoid: str = "",
    deadline: Deadline | None = None,
) -> Masked:
    """``sentence`` with every protected span replaced by a sentinel that neither it nor
    ``avoid`` (the glossary's targets for it) holds as a word.

    Raises:
        ProtectError: a placeholder left unbalanced, or a pattern that runs over
            ``MATCH_SECONDS`` (``place`` names the sentence in the message).
    """
    where = f"{place}: " if place else ""
    found: list[tuple[int, int]] = []
    for pattern in patterns:
        seconds = MATCH_SECONDS if deadline is None else deadline.left(where)
        try:
            found += [m.span() for m in pattern.finditer(sentence, timeout=seconds)]
        except TimeoutError:
            if deadline is not None:
                deadline.left(where)  # the call's time, not the pattern's, ran out
            raise ProtectError(
                f"{where}protect pattern {pattern.pattern!r} ran over {MATCH_SECONDS:g}s"
            ) from None
    chosen = _runs(sentence, found)
    free = [n for n in SENTINELS if not _word(n).search(sentence) and not _word(n).search(avoid)]
    if len(chosen) > len(free):
        raise ProtectError(f"{where}more than {len(free)} protected spans in one sentence")
    pieces, spans, last = [], [], 0
    words = _count_words(_spaced(sentence, chosen))
    for (start, stop), sentinel in zip(chosen, free, strict=False):
        tight = (_tight(sentence[start - 1 : start]), _tight(sentence[stop : stop + 1]))
        pieces += [sentence[last:start], f"{' ' * tight[0]}{sentinel}{' ' * tight[1]}"]
        before = _count_words(_spaced(sentence[:start], chosen))
        spans.append(Span(sentence[start:stop], sentinel, tight, before / max(words, 1)))
        last = stop
    pieces.append(sentence[last:])
    _check_balanced("".join(p if i % 2 == 0 else " " for i, p in enumerate(pieces)), where)
    return Masked("".join(pieces), tuple(spans))


def _runs(sentence: str, found: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """The spans to protect, in order: of overlapping matches the leftmost, then the longest;
    spans with nothing but spacing between them (``%s%d``, ``{a} {b}``) joined into one run,
    which comes back whole, in its order, with its spacing."""
    chosen: list[tuple[int, int]] = []
    for start, stop in sorted((s, -e) for s, e in found if e > s):
        stop = -stop
        if chosen and start < chosen[-1][1]:
            continue  # inside or across one already chosen
        if chosen and not sentence[chosen[-1][1] : start].strip():
            chosen[-1] = (chosen[-1][0], stop)
        else:
            chosen.append((start, stop))
    return chosen


@lru_cache(maxsize=256)
def _word(sentinel: str) -> regex.Pattern:
    """``sentinel`` as a word of its own (so 71 is not found in 171, nor Tom in Tomate)."""
    return regex.compile(rf"(?<!\w){regex.escape(sentinel)}(?!\w)")


def _spaced(text: str, spans: list[tuple[int, int]]) -> str:
    """``text`` with the ``spans`` (character ranges) that fall inside it blanked out."""
    for start, stop in spans:
        text = text[:start] + " " * (min(stop, len(text)) - start) + text[stop:]
    return text


WORD_CHARACTER = regex.compile(r"\w")


def _count_words(text: str) -> int:
    """How many of ``text``'s space-separated pieces hold a word character."""
    return sum(1 for piece in text.split() if WORD_CHARACTER.search(piece))


def _tight(neighbour: str) -> bool:
    """Whether a span touches ``neighbour`` (a word character): its sentinel then gets a
    space on that side, so it stays a word of its own, and the space goes again after."""
    return bool(neighbour) and (neighbour.isalnum() or neighbour == "_")


def _check_balanced(rest: str, where: str) -> None:
    bad = UNBALANCED.search(rest)
    if bad is not None:
        raise ProtectError(
            f"{where}unbalanced placeholder {bad.group()!r} at character {bad.start() + 1} "
            "(close it, or turn protected spans off: --no-protect, protect_spans: false)"
        )


def _put_back(text: str, span: Span) -> str:
    first = _word(span.sentinel).search(text)
    before, after = text[: first.start()], text[first.end() :]
    after = regex.sub(rf"\s?{_word(span.sentinel).pattern}", "", after)  # copies dropped
    if span.tight[0]:
        before = before.rstrip()
    if span.tight[1]:
        after = after.lstrip()
    return before + span.text + after


def _put_where_they_stood(text: str, spans: list[Span]) -> str:
    """``text`` with ``spans`` (in the sentence's order) put among its words where each
    stood in the sentence (``at``), before the final punctuation; spans that land between
    the same two words keep their order."""
    if not spans:
        return text
    end = FINAL_PUNCTUATION.search(text).start()
    words = text[:end].split(" ") if text[:end] else []
    places = [int(span.at * len(words) + 0.5) for span in spans]  # halves round up
    out: list[str] = []
    for i in range(len(words) + 1):
        out += [span.text for span, place in zip(spans, places, strict=True) if place == i]
        out += words[i : i + 1]
    return " ".join(out) + text[end:]


def pattern_problem(patterns: tuple[str, ...]) -> str | None:
    """What is wrong with a user's protect patterns (one that does not compile), in one
    line; None when nothing is. ``SearchOptions`` checks the rest of its fields itself."""
    try:
        compile_patterns(patterns)
    except ProtectError as e:
        return str(e)
    return None
