"""Translations a score hides: empty ones, and degenerate ones (a loop of words or letters).

A model that answers nothing scores BLEU 0.00, and one that loops scores little more, without
a word of why; every place that prints a score also prints this count.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

LOOP_COPIES = 4  # a text ending in 4 copies of one run of words (or of letters) loops
LOOP_SPAN = 6  # the longest run of words looked for
# one to three letters repeated 8 times ("AAAAAAAA", "hahahahahahahaha"; digits are not)
_LETTER_RUN = re.compile(rf"([^\W\d_]{{1,3}})\1{{{2 * LOOP_COPIES - 1},}}")


@dataclass(frozen=True)
class OutputCheck:
    """How many of ``sentences`` translations are empty (where the reference is not) or
    degenerate (``is_degenerate``)."""

    sentences: int
    empty: int
    degenerate: int

    @property
    def warning(self) -> str | None:
        """One line saying what is wrong, or None when nothing is."""
        if not self.empty and not self.degenerate:
            return None
        parts = [
            f"{n:,} {what}"
            for n, what in ((self.empty, "empty"), (self.degenerate, "degenerate (looping)"))
            if n
        ]
        return f"warning: {' and '.join(parts)} of {self.sentences:,} translations"

    @property
    def mostly_bad(self) -> bool:
        """More than half the translations are empty or degenerate."""
        return 2 * (self.empty + self.degenerate) > self.sentences


def is_degenerate(text: str) -> bool:
    """Whether ``text`` ends in ``LOOP_COPIES`` copies of a run of at most ``LOOP_SPAN``
    words, or holds one short run of letters repeated twice as many times."""
    if _LETTER_RUN.search(text):
        return True
    words = text.split()
    for n in range(1, LOOP_SPAN + 1):
        need = n * LOOP_COPIES
        if need > len(words):
            break
        tail = words[len(words) - need :]
        if all(tail[i] == tail[i % n] for i in range(need)):
            return True
    return False


def check_outputs(hypotheses: Sequence[str], references: Sequence[str]) -> OutputCheck:
    """Count the empty and degenerate ``hypotheses`` (an empty one counts only where its
    reference is not empty)."""
    empty = sum(
        1 for h, r in zip(hypotheses, references, strict=True) if r.strip() and not h.strip()
    )
    degenerate = sum(1 for h in hypotheses if h.strip() and is_degenerate(h))
    return OutputCheck(len(hypotheses), empty, degenerate)
