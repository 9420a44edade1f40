"""The preprocessing a model's training text went through, as a typed record, and the
processor that applies it to an input and undoes what can be undone on an output.

The steps are the Moses scripts' (through sacremoses), in the order of Multi30k's
``task1-tokenize.sh``: ``normalize-punctuation.perl -l LANG``, ``tokenizer.perl -l LANG``
(which escapes ``&<>'"[]|``), ``lowercase.perl``. On an output, escaping and tokenisation are
undone (``detokenizer.perl``); lowercasing cannot be undone, so the first letter of the
output is capitalised (and English's lone ``i``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from sacremoses import MosesDetokenizer, MosesPunctNormalizer, MosesTokenizer


@dataclass(frozen=True, kw_only=True)
class Preprocessing:
    """What was done to one language's text before it was cut into subwords."""

    normalize_punctuation: bool = False  # normalize-punctuation.perl -l LANG
    tokenize: bool = False  # tokenizer.perl -l LANG (not aggressive on dashes)
    escape: bool = False  # with tokenize: & < > ' " [ ] | as Moses's &amp; ... entities
    lowercase: bool = False  # lowercase.perl

    def __post_init__(self) -> None:
        for name, value in vars(self).items():
            if not isinstance(value, bool):
                raise TypeError(f"preprocessing {name} must be true or false, got {value!r}")


NO_PREPROCESSING = Preprocessing()
# Multi30k's tok/ files (task1-tokenize.sh), the text the literature scores BLEU on
MOSES_LOWERCASED = Preprocessing(
    normalize_punctuation=True, tokenize=True, escape=True, lowercase=True
)


@lru_cache(maxsize=32)
def _moses(lang: str) -> tuple[MosesPunctNormalizer, MosesTokenizer, MosesDetokenizer]:
    """The Moses steps for ``lang``. sacremoses is imported here, the first time text is
    preprocessed: importing it (its compiled patterns) is 0.4 s of ``aiayn translate``'s
    start-up, which a model trained on raw text never needs."""
    from sacremoses import MosesDetokenizer, MosesPunctNormalizer, MosesTokenizer

    return MosesPunctNormalizer(lang=lang), MosesTokenizer(lang=lang), MosesDetokenizer(lang=lang)


_LONE_I = re.compile(r"(?<![\w'])i(?!\w)")


class TextProcessor:
    """One language's ``Preprocessing``: ``prepare`` an input the way the training text
    was, ``restore`` an output to natural text.

    Args:
        steps: the record (``tokenizer.json``'s ``src_preprocessing`` or ``tgt_preprocessing``).
        lang: an ISO 639-1 code; Moses's language-specific rules apply where it has them.
    """

    def __init__(self, steps: Preprocessing, lang: str):
        self.steps = steps
        self.lang = lang or "en"

    def prepare(self, text: str) -> str:
        """``text`` (one sentence) as the model's training text looked."""
        s = self.steps
        if s.normalize_punctuation:
            text = _moses(self.lang)[0].normalize(text)
        if s.tokenize:
            text = _moses(self.lang)[1].tokenize(text, return_str=True, escape=s.escape)
        if s.lowercase:
            text = text.lower()
        return text.strip()

    def restore(self, text: str) -> str:
        """A model's output as natural text: detokenised, unescaped, its first letter
        capitalised when the training text was lowercased."""
        s = self.steps
        if s.tokenize:
            text = _moses(self.lang)[2].detokenize(text.split(), unescape=s.escape)
        if s.lowercase:
            if self.lang == "en":
                text = _LONE_I.sub("I", text)
            text = _capitalise_first(text)
        return text


def _capitalise_first(text: str) -> str:
    for i, char in enumerate(text):
        if char.isalpha():
            return text[:i] + char.upper() + text[i + 1 :]
    return text
