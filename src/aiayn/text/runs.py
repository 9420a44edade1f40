"""Text split into runs (HTML text nodes, a word processor's runs, a subtitle's lines):
translated as one text, the translation dealt back to the runs.

The rule, shared by ``aiayn.text.html`` and ``aiayn.text.documents``:

- A segment's text is its runs joined, from the first run that is not blank to the last,
  with its whitespace collapsed to single spaces; a segment without a letter or a digit is
  not translated.
- The translation's words are dealt, in order, to the runs in proportion to the words
  (pieces with a letter or digit) each held in the source (every run with a letter or digit
  gets at least one word while words last; a run of punctuation alone gets none: its
  punctuation is translated with the rest), so formatting carried by a run wraps the part
  of the translation at the position its text had in the source.
- The space between two runs stays on the side it had in the source: at the end of the
  first, unless the first did not end with a space and the second began with one, so
  formatting never gains a space at its edge that it did not have.
- Blank runs before the first and after the last run with text are left alone, and so are
  the first run's leading and the last run's trailing whitespace.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

_WORD = re.compile(r"\S+\s*")


def has_word(text: str) -> bool:
    """Whether ``text`` holds a letter or a digit."""
    return any(c.isalnum() for c in text)


def segment_text(runs: Sequence[str]) -> str:
    """The text a segment of ``runs`` is translated as (module docstring)."""
    filled = [run for run in runs if run.strip()]
    return " ".join("".join(_inner(runs)).split()) if filled else ""


def deal(runs: Sequence[str], translation: str) -> list[str]:
    """The runs' texts with ``translation`` dealt to them (module docstring)."""
    first, last = _edges(runs)
    if first < 0:
        return list(runs)
    inner = runs[first : last + 1]
    weights = [sum(has_word(word) for word in run.split()) for run in inner]
    words = _WORD.findall(translation.strip())
    lead = runs[first][: len(runs[first]) - len(runs[first].lstrip())]
    tail = runs[last][len(runs[last].rstrip()) :]
    out = list(runs)
    start, carried = 0, ""
    for k, share in enumerate(shares(weights, len(words))):
        text = carried + "".join(words[start : start + share])
        start += share
        if k == 0:
            text = lead + text
        if k == len(inner) - 1:
            out[first + k] = text.rstrip() + tail
            break
        stripped = text.rstrip()
        carried = ""
        if inner[k + 1][:1].isspace() and not inner[k][-1:].isspace():
            carried, text = text[len(stripped) :], stripped  # the space opens the next run
        out[first + k] = text
    return out


def shares(weights: Sequence[int], words: int) -> list[int]:
    """``words`` dealt in order in proportion to ``weights``: every positive weight gets
    at least one while there are enough, a zero weight none."""
    total = sum(weights)
    later = sum(w > 0 for w in weights)  # positive weights not yet dealt to
    out, given, seen = [], 0, 0
    for w in weights:
        if w == 0:
            out.append(0)
            continue
        seen += w
        later -= 1
        end = max(round(words * seen / total), given + 1)  # at least one word
        end = max(given, min(end, words - later, words))  # one left for each later run
        out.append(end - given)
        given = end
    return out


def _edges(runs: Sequence[str]) -> tuple[int, int]:
    filled = [i for i, run in enumerate(runs) if run.strip()]
    return (filled[0], filled[-1]) if filled else (-1, -1)


def _inner(runs: Sequence[str]) -> Sequence[str]:
    first, last = _edges(runs)
    return runs[first : last + 1]
