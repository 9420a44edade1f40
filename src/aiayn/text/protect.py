"""Protected spans: placeholders, inline code, URLs, e-mail addresses and a user's own
patterns, kept verbatim and exactly once in a translation.

Each span of a sentence is replaced by a sentinel (a number the sentence does not hold, which
a translation model copies as it copies any number), the sentence is translated (the search
is told to emit every sentinel: ``aiayn.decode.constrained``), and each sentinel in the
output is replaced by its span: the first occurrence only, any copy dropped, one missing
appended at the end. So every span comes back exactly once, wherever the model put its
sentinel. Patterns are matched with ``regex`` under a time limit, so a user's pattern cannot
stall a server.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache

import regex

from aiayn.errors import AiaynError

MATCH_SECONDS = 0.5  # one pattern over one sentence: longer is a runaway pattern, refused

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
SENTINELS = tuple(str(n) for n in range(71, 100))  # numbers rare in sentences, one per span


class ProtectError(AiaynError, ValueError):
    """A pattern that does not compile or runs away, or a sentence with an unbalanced
    placeholder; the message says which in one line."""


@dataclass(frozen=True)
class Span:
    """One protected span of a sentence and the sentinel that stands for it."""

    text: str
    sentinel: str
    tight: tuple[bool, bool] = (False, False)  # no space before / after it in the sentence


@dataclass(frozen=True)
class Masked:
    """A sentence with its spans replaced by sentinels."""

    text: str
    spans: tuple[Span, ...]

    def restore(self, translation: str) -> str:
        """``translation`` with each sentinel replaced by its span, exactly once (the first
        occurrence; copies are dropped, a missing one is appended)."""
        for span in self.spans:
            translation = _put_back(translation, span)
        return translation


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


def mask(sentence: str, patterns: Sequence[regex.Pattern], *, place: str = "") -> Masked:
    """``sentence`` with every protected span replaced by a sentinel it does not hold.

    Raises:
        ProtectError: a placeholder left unbalanced, or a pattern that runs over
            ``MATCH_SECONDS`` (``place`` names the sentence in the message).
    """
    where = f"{place}: " if place else ""
    found: list[tuple[int, int]] = []
    for pattern in patterns:
        try:
            found += [m.span() for m in pattern.finditer(sentence, timeout=MATCH_SECONDS)]
        except TimeoutError:
            raise ProtectError(
                f"{where}protect pattern {pattern.pattern!r} ran over {MATCH_SECONDS:g}s"
            ) from None
    chosen, end = [], 0
    for start, stop in sorted((s, -e) for s, e in found if e > s):
        if start >= end:
            chosen.append((start, -stop))
            end = -stop
    free = [n for n in SENTINELS if not regex.search(rf"(?<!\d){n}(?!\d)", sentence)]
    if len(chosen) > len(free):
        raise ProtectError(f"{where}more than {len(free)} protected spans in one sentence")
    pieces, spans, last = [], [], 0
    for (start, stop), sentinel in zip(chosen, free, strict=False):
        tight = (_tight(sentence[start - 1 : start]), _tight(sentence[stop : stop + 1]))
        pieces += [sentence[last:start], f"{' ' * tight[0]}{sentinel}{' ' * tight[1]}"]
        spans.append(Span(sentence[start:stop], sentinel, tight))
        last = stop
    pieces.append(sentence[last:])
    _check_balanced("".join(p if i % 2 == 0 else " " for i, p in enumerate(pieces)), where)
    return Masked("".join(pieces), tuple(spans))


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
    whole = regex.compile(rf"(?<!\d){span.sentinel}(?!\d)")
    first = whole.search(text) or regex.search(regex.escape(span.sentinel), text)
    if first is None:
        return f"{text} {span.text}" if text else span.text
    before, after = text[: first.start()], text[first.end() :]
    after = regex.sub(rf"\s?(?<!\d){span.sentinel}(?!\d)", "", after)  # copies dropped
    if span.tight[0]:
        before = before.rstrip()
    if span.tight[1]:
        after = after.lstrip()
    return before + span.text + after
