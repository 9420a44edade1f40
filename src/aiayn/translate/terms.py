"""Terms and trust around a translation: each sentence's protected spans and glossary terms
(``aiayn.text.protect``, ``aiayn.text.glossary``) turned into the constraints of the search
and put back into its output, and the confidence of a translation, from the model's own
scores.

A confidence is the geometric mean of the probabilities the model gave the tokens it
emitted, EOS included: ``exp(log P(Y | X) / (|Y| + 1))``, in [0, 1] (length-normalised, so
short and long translations compare); a line of several sentences takes its tokens' mean
over all of them.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import lru_cache

from aiayn.config import UNK_ID
from aiayn.data.tokenizer import Tokenizer
from aiayn.text.glossary import Glossary, Term, spell_as_glossary
from aiayn.text.html import HtmlText
from aiayn.text.protect import Deadline, Masked, compile_patterns, mask
from aiayn.text.sentences import Paragraph

GREEDY_FALLBACK_BEAM = 4  # the beam of a constrained search asked for with beam 1 (greedy)


@dataclass(frozen=True)
class Sentence:
    """One sentence of a translation and the model's confidence in it."""

    text: str
    confidence: float


@dataclass(frozen=True)
class Translation:
    """One translation: its text, its length-normalised log-probability (the search's
    score; 0.0 for greedy and empty input), its target ids, its confidence in [0, 1],
    whether it is the source given back because that confidence was below the minimum,
    and, for a text cut into sentences, each sentence's translation and confidence, in
    order (their texts stand in ``text`` in that order, with the source's spacing)."""

    text: str
    score: float
    tokens: list[int]
    confidence: float = 1.0
    flagged: bool = False
    sentences: tuple[Sentence, ...] = ()

    def by_sentence(self) -> tuple[Sentence, ...]:
        """Each sentence's translation and confidence; a translation not cut into
        sentences (raw text, an HTML document, a source given back) is one."""
        return self.sentences or (Sentence(self.text, self.confidence),)


@dataclass(frozen=True)
class Marked:
    """One sentence as the model sees it (its spans replaced by sentinels) with what goes
    back into its translation."""

    text: str
    masked: Masked | None = None
    terms: tuple[Term, ...] = field(default=())

    def finish(self, translation: str) -> str:
        """The restored translation with the glossary's spelling and the spans put back."""
        translation = spell_as_glossary(translation, self.terms)
        return self.masked.restore(translation) if self.masked else translation


def mark(
    sentences: Sequence[str],
    places: Sequence[str],
    *,
    protect: bool,
    patterns: tuple[str, ...],
    glossary: Glossary | None,
) -> list[Marked]:
    """Each sentence with its spans masked (when ``protect``) and its glossary terms.

    Raises:
        ProtectError: an unbalanced placeholder or a runaway pattern (naming the place).
    """
    compiled = compile_patterns(patterns) if protect else ()
    deadline = Deadline()  # every pattern over every sentence of the call
    marked = []
    for sentence, place in zip(sentences, places, strict=True):
        masked = mask(sentence, compiled, place=place, deadline=deadline) if protect else None
        if masked is not None and not masked.spans:
            masked = None
        # a term inside a protected span (a URL, code) is no term of the sentence
        terms = tuple(glossary.matches(masked.text if masked else sentence)) if glossary else ()
        if masked is not None and terms:  # no sentinel that a target term writes
            targets = " ".join(t.target for t in terms)
            masked = mask(sentence, compiled, place=place, avoid=targets, deadline=deadline)
        marked.append(Marked(masked.text if masked else sentence, masked, terms))
    return marked


def constraints_of(
    marked: Sequence[Marked],
    prepare: Callable[[str], str],
    tokenizer: Tokenizer,
    warn: Callable[[str], None],
    *,
    spans: bool,
) -> list[list[list[int]]]:
    """Each sentence's constraints: the target ids of its glossary terms and, with ``spans``
    (``SearchOptions.impose_spans``), of its sentinels, as
    the target side's training text was prepared (``prepare``) and cut into subwords alone
    (a term is imposed in the pieces it is cut into on its own). A term the target
    vocabulary cannot spell (an unknown piece) is left out, with a warning."""
    texts = sorted({t for m in marked for t in _targets(m, spans)})
    ids = dict(zip(texts, tokenizer.encode([prepare(t) for t in texts]), strict=True))
    out = []
    for m in marked:
        found = []
        for text in _targets(m, spans):
            if not ids[text] or UNK_ID in ids[text]:
                warn(f"the model's target vocabulary cannot spell {text!r}: not imposed")
                continue
            found.append(ids[text])
        out.append(found)
    return out


def _targets(m: Marked, spans: bool) -> list[str]:
    sentinels = [s.sentinel for s in m.masked.spans] if m.masked and spans else []
    return sentinels + [t.target for t in m.terms]


SENTENCE_ENDS = frozenset(".!?。！？…")


@lru_cache(maxsize=16)
def term_masks(tokenizer: Tokenizer) -> dict[str, tuple[bool, ...]]:
    """What a constrained search needs of the target vocabulary
    (``aiayn.translate.batches.search``'s arguments), per token, read from its pieces once
    per tokenizer (every batch with a glossary term or a sentinel asks):

    - ``glued``: whether it continues the word before it, a SentencePiece piece that starts
      with a letter or digit, not with the word-start mark ``▁`` (punctuation may follow a
      word directly). None of them may follow a completed glossary term or sentinel.
    - ``closing``: whether it ends a sentence, a piece of nothing but final punctuation
      (``.``, ``▁.``, ``!``, ``?``, ``…``). None is written while a term or sentinel is
      still to come, so the search puts a term inside the sentence, not after its full stop.
    """
    pieces = tokenizer.pieces(range(tokenizer.vocab_size))
    return {
        "glued": tuple(bool(p) and p[0].isalnum() for p in pieces),
        "closing": tuple(
            bool(p.lstrip("▁")) and set(p.lstrip("▁")) <= SENTENCE_ENDS for p in pieces
        ),
    }


def confidence(log_prob: float, n_tokens: int) -> float:
    """exp(log_prob / (n_tokens + 1)): the geometric mean of the emitted tokens' (EOS
    included) probabilities."""
    return min(1.0, math.exp(log_prob / (n_tokens + 1)))


def mean_confidence(parts: Sequence[Translation]) -> float:
    """The confidence of translations taken together, each weighted by its tokens (+ EOS);
    1.0 for none."""
    weights = [len(t.tokens) + 1 for t in parts]
    if not parts:
        return 1.0
    logs = sum(w * math.log(max(t.confidence, 1e-300)) for t, w in zip(parts, weights, strict=True))
    return min(1.0, math.exp(logs / sum(weights)))


def join(
    paragraphs: Sequence[Paragraph], found: Sequence[list[Translation]], nbest: int
) -> list[list[Translation]]:
    """Each paragraph's translations: its sentences' hypotheses joined in its spacing (the
    k-th hypothesis joins the sentences' k-th; its score is their mean, its confidence
    their tokens' mean, and it keeps each sentence's text and confidence)."""
    results, start = [], 0
    for paragraph in paragraphs:
        sentences = found[start : start + len(paragraph.sentences)]
        start += len(paragraph.sentences)
        if not sentences:
            results.append([Translation(paragraph.join([]), 0.0, [])])
            continue
        hyps = []
        for k in range(min(nbest, max(len(h) for h in sentences))):
            chosen = [h[min(k, len(h) - 1)] for h in sentences]
            text = paragraph.join([t.text for t in chosen])
            score = sum(t.score for t in chosen) / len(chosen)
            tokens = [i for t in chosen for i in t.tokens]
            parts = tuple(Sentence(t.text, t.confidence) for t in chosen)
            hyps.append(Translation(text, score, tokens, mean_confidence(chosen), sentences=parts))
        results.append(hyps)
    return results


def calibrated(translation: Translation, calibration: Callable[[float], float]) -> Translation:
    """``translation`` with its confidence and each sentence's mapped by ``calibration``."""
    parts = tuple(Sentence(s.text, calibration(s.confidence)) for s in translation.sentences)
    return dataclasses.replace(
        translation, confidence=calibration(translation.confidence), sentences=parts
    )


def keep_confident(
    lines: Sequence[str], results: list[list[Translation]], minimum: float
) -> list[list[Translation]]:
    """``results`` with each line whose best translation's confidence is below ``minimum``
    replaced by the line itself, flagged (its confidence kept)."""
    if minimum <= 0:
        return results
    return [
        [Translation(line, 0.0, [], hyps[0].confidence, flagged=True)]
        if hyps and hyps[0].confidence < minimum
        else hyps
        for line, hyps in zip(lines, results, strict=True)
    ]


def render_documents(
    lines: Sequence[str],
    documents: list[HtmlText],
    joined: list[list[Translation]],
    nbest: int,
) -> list[list[Translation]]:
    """Each HTML document (parsed from ``lines``) with its texts' translations in place, its
    ``nbest`` alternatives too: the k-th holds each text's k-th translation (or its last, for a
    text with fewer), its score their mean, its confidence their tokens' mean."""
    results, start = [], 0
    for line, document in zip(lines, documents, strict=True):
        parts = joined[start : start + len(document.texts)]
        start += len(document.texts)
        alternatives = []
        for k in range(nbest if parts else 1):
            chosen = [hyps[min(k, len(hyps) - 1)] for hyps in parts]
            page = document if k == 0 else HtmlText(line)  # rendering fills a document once
            text = page.render([t.text for t in chosen])
            score = sum(t.score for t in chosen) / len(chosen) if chosen else 0.0
            alternatives.append(Translation(text, score, [], mean_confidence(chosen)))
        results.append(alternatives)
    return results


def worded_only(
    sentences: list[str],
    places: list[str],
    translate: Callable[[list[str], list[str]], list[list[Translation]]],
) -> list[list[Translation]]:
    """``translate(sentences, places)`` for the sentences with a letter; one without (a
    number, a date, a code, a price) is given back as it is, confidence 1: there is nothing
    to translate in it, and a model would invent words for it."""
    worded = [i for i, s in enumerate(sentences) if any(c.isalpha() for c in s)]
    found = iter(translate([sentences[i] for i in worded], [places[i] for i in worded]))
    keep = set(worded)
    return [
        next(found) if i in keep else [Translation(s, 0.0, [])] for i, s in enumerate(sentences)
    ]
