"""Glossaries: source terms and the target terms a translation must use for them.

A glossary is a TSV file, one ``source term<TAB>target term`` a line (blank lines and lines
starting with ``#`` are skipped), or the same pairs from a request. A source term is found in
a sentence as whole words, ignoring case, exactly as written (no inflection: list each form
that should be caught); the longest term wins where two overlap. Its target term is imposed
on the translation (``aiayn.decode.constrained``) and written back exactly as the glossary
spells it, also by a model trained on lowercased text.
"""

from __future__ import annotations

import hashlib
import json
import threading
from collections import OrderedDict
from collections.abc import Iterable
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Any

import regex

from aiayn.errors import AiaynError

MAX_TERMS = 100_000


class GlossaryError(AiaynError, ValueError):
    """A glossary that cannot be used: the message names the file or field, the line and
    what is wrong, in one line."""


@dataclass(frozen=True)
class Term:
    source: str
    target: str


@dataclass(frozen=True)
class Glossary:
    """Terms, longest source term first (checked: each pair non-empty, one target per
    source term)."""

    terms: tuple[Term, ...]

    @classmethod
    def from_pairs(cls, pairs: Iterable[Any], *, origin: str = "glossary") -> Glossary:
        """A glossary of ``(source, target)`` pairs (a mapping's items, or two-item lists).

        Raises:
            GlossaryError: no pair, a pair that is not two non-empty strings, or a source
                term given two targets (``origin`` names where they came from).
        """
        found: dict[str, Term] = {}
        for n, pair in enumerate(pairs, 1):
            if (
                isinstance(pair, str | bytes)
                or not isinstance(pair, list | tuple)
                or len(pair) != 2
            ):
                raise GlossaryError(f"{origin}: entry {n}: expected [source term, target term]")
            found = _add(found, pair[0], pair[1], f"{origin}: entry {n}")
        if not found:
            raise GlossaryError(f"{origin}: no terms")
        if len(found) > MAX_TERMS:
            raise GlossaryError(f"{origin}: {len(found)} terms, at most {MAX_TERMS:,}")
        return cls(tuple(sorted(found.values(), key=lambda t: (-len(t.source), t.source))))

    @cached_property
    def digest(self) -> str:
        """SHA-256 of the terms: glossaries of the same terms share one compiled matcher."""
        content = json.dumps([[t.source, t.target] for t in self.terms], ensure_ascii=False)
        return hashlib.sha256(content.encode("utf-8")).hexdigest()

    def __getstate__(self) -> dict[str, Any]:
        """The terms and their digest: a copy sent to a decoding process (a batch's options)
        finds its matcher there by the digest, never recompiling what it has."""
        return {"terms": self.terms, "digest": self.digest}

    @property
    def source_pattern(self) -> str:
        """A regular expression that finds the source terms as ``matches`` does (whole
        words, any case): what a leg through another language keeps as protected spans."""
        return "(?i)" + _matcher(self)[0].pattern

    def matches(self, sentence: str) -> list[Term]:
        """The terms whose source term ``sentence`` holds, in the order they occur (a term
        once however often it occurs)."""
        pattern, by_source = _matcher(self)
        found: dict[str, Term] = {}
        for m in pattern.finditer(sentence):
            term = by_source.get(m.group().casefold())
            if term is not None:
                found.setdefault(term.source, term)
        return list(found.values())


_MATCHERS: OrderedDict[str, tuple[regex.Pattern, dict[str, Term]]] = OrderedDict()
MATCHERS_KEPT = 8  # compiled glossaries a process keeps, the latest used
_MATCHERS_LOCK = threading.Lock()


def _matcher(glossary: Glossary) -> tuple[regex.Pattern, dict[str, Term]]:
    """The compiled pattern of ``glossary``'s source terms and its terms by casefolded
    source, compiled once per process for each content (by its digest): a server's
    glossary and a request's repeated one are compiled once, not per batch."""
    key = glossary.digest
    with _MATCHERS_LOCK:
        found = _MATCHERS.get(key)
        if found is not None:
            _MATCHERS.move_to_end(key)
            return found
    found = compile_terms(glossary.terms)
    with _MATCHERS_LOCK:
        _MATCHERS[key] = found
        while len(_MATCHERS) > MATCHERS_KEPT:
            _MATCHERS.popitem(last=False)
    return found


def compile_terms(terms: tuple[Term, ...]) -> tuple[regex.Pattern, dict[str, Term]]:
    """One pattern for all source terms (whole words, ignoring case) and the terms by
    casefolded source."""
    words = "|".join(regex.escape(t.source) for t in terms)
    pattern = regex.compile(rf"(?<!\w)(?:{words})(?!\w)", regex.IGNORECASE)
    return pattern, {t.source.casefold(): t for t in terms}


def _add(found: dict[str, Term], source: Any, target: Any, where: str) -> dict[str, Term]:
    if not isinstance(source, str) or not isinstance(target, str):
        raise GlossaryError(f"{where}: source and target terms must be text")
    source, target = source.strip(), target.strip()
    if not source or not target:
        raise GlossaryError(f"{where}: an empty {'source' if not source else 'target'} term")
    key = source.casefold()
    if key in found and found[key].target != target:
        raise GlossaryError(
            f"{where}: {source!r} again, with another target ({found[key].target!r} before)"
        )
    found[key] = Term(source, target)
    return found


def read_glossary(path: str | Path) -> Glossary:
    """A glossary from a TSV file (``source term<TAB>target term`` a line; UTF-8, a
    byte-order mark allowed; blank lines and ``#`` comments skipped: ``tsv_pairs``).

    Raises:
        GlossaryError: the file cannot be read, is not UTF-8, holds no term, or has a line
            that is not two tab-separated terms (naming the file and the line).
    """
    try:
        text = Path(path).read_text(encoding="utf-8-sig")
    except UnicodeDecodeError as e:
        raise GlossaryError(f"{path}: not UTF-8 text ({e.reason} at byte {e.start})") from None
    except OSError as e:
        raise GlossaryError(f"{path}: cannot read the glossary ({e.strerror or e})") from None
    pairs = tsv_pairs(text, str(path))
    if not pairs:
        raise GlossaryError(f"{path}: no terms (one 'source term<TAB>target term' a line)")
    found: dict[str, Term] = {}
    for n, (source, target) in pairs:
        found = _add(found, source, target, f"{path}: line {n}")
    return Glossary.from_pairs([(t.source, t.target) for t in found.values()], origin=str(path))


def tsv_pairs(text: str, where: str) -> list[tuple[int, list[str]]]:
    """The (line number, [source, target]) of a glossary's TSV text, a file's or a
    request's alike: blank lines and ``#`` comments skipped, a leading byte-order mark too.

    Raises:
        GlossaryError: a line that is not two tab-separated terms.
    """
    pairs = []
    for n, line in enumerate(text.removeprefix("\ufeff").splitlines(), 1):
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        fields = line.split("\t")
        if len(fields) != 2:
            raise GlossaryError(
                f"{where}: line {n}: expected 'source term<TAB>target term', got "
                f"{len(fields)} field{'s' if len(fields) != 1 else ''}"
            )
        pairs.append((n, fields))
    return pairs


def spell_as_glossary(translation: str, terms: Iterable[Term]) -> str:
    """``translation`` with each target term written as the glossary spells it (a model
    trained on lowercased text emits it lowercased)."""
    for term in terms:
        translation = regex.sub(
            rf"(?<!\w){regex.escape(term.target)}(?!\w)",
            lambda _m, t=term.target: t,
            translation,
            flags=regex.IGNORECASE,
        )
    return translation
