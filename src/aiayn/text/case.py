"""Shouted text: sentences in capitals, which a model trained on ordinary text never saw.

An all-caps sentence is cut into many rare pieces and can send a model into a loop. It is
translated in the case the model knows instead: each word lower-cased or capitalised,
whichever the model's source vocabulary cuts into fewer pieces (German nouns keep their
capital, English words lose it), the first word capitalised; the translation can then be
given back in capitals (``str.upper``).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

MIN_SHOUTED_WORDS = 2  # one capitalised word is an acronym (NASA), not shouting


def is_shouted(text: str) -> bool:
    """Whether ``text`` has no lower-case letter and at least ``MIN_SHOUTED_WORDS`` words of
    two or more capitals (scripts without case, such as Hangul, are never shouted)."""
    if any(c.islower() for c in text):
        return False
    words = [w for w in text.split() if sum(c.isupper() for c in w) >= 2]
    return len(words) >= MIN_SHOUTED_WORDS


def in_known_case(
    texts: Sequence[str], count_pieces: Callable[[list[str]], list[int]]
) -> list[str]:
    """Each text with its words in the case the model knows (above).

    Args:
        texts: shouted texts (``is_shouted``).
        count_pieces: the number of source pieces of each of a list of words.
    """
    words = sorted({w for t in texts for w in t.split()})
    lower = [w.lower() for w in words]
    capital = [w.capitalize() for w in words]
    counts = count_pieces(lower + capital)
    chosen = {
        w: capital[i] if counts[len(words) + i] < counts[i] else lower[i]
        for i, w in enumerate(words)
    }
    return [_first_capital(_recased(t, chosen)) for t in texts]


def _recased(text: str, chosen: dict[str, str]) -> str:
    """``text`` with every word replaced by its chosen case, the spacing kept."""
    parts, start = [], 0
    for word in text.split():
        at = text.index(word, start)
        parts += [text[start:at], chosen[word]]
        start = at + len(word)
    return "".join([*parts, text[start:]])


def _first_capital(text: str) -> str:
    for i, c in enumerate(text):
        if c.isalpha():
            return text[:i] + c.upper() + text[i + 1 :]
    return text
