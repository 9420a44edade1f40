"""Text in, text out: tokenise, batch by length, search, detokenise, restore input order."""

from __future__ import annotations

import logging
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal, get_args

import torch

from aiayn.accel import Profile
from aiayn.data.tokenizer import Tokenizer
from aiayn.data.tokenizer_files import check_vocabularies, load_tokenizers
from aiayn.decode.beam import STOPPING, beam_search
from aiayn.decode.greedy import greedy_search
from aiayn.decode.stepper import Precision, StepDecoder, stepper_for
from aiayn.errors import AiaynError
from aiayn.models.transformer import Transformer
from aiayn.store import load_model
from aiayn.text.html import HtmlText
from aiayn.text.preprocessing import NO_PREPROCESSING, Preprocessing, TextProcessor
from aiayn.text.sentences import Paragraph, split_paragraph

TextMode = Literal["natural", "raw"]
TextFormat = Literal["text", "html"]

LOGGER = logging.getLogger("aiayn")  # warnings where the caller passes no warn


class TranslationError(AiaynError, ValueError):
    """Input that cannot be translated under the chosen options (e.g. an over-long line)."""


@dataclass(frozen=True, kw_only=True)
class SearchOptions:
    """How ``Translator.translate`` searches: beam width (1 is greedy search), length
    penalty, n-best, output length, batching, precision and the beam search's stopping
    rule. The defaults are the paper's decoding (§6.1: beam search, α 0.6, up to the source
    length + 50)."""

    beam: int = 5  # 1: greedy
    alpha: float | None = 0.6  # length penalty (§6.1)
    nbest: int = 1
    max_len_b: int = 50  # output length <= source length + max_len_b (§6.1)
    batch_tokens: int = 4096  # source tokens per batch (padded)
    max_src_len: int = 1024  # longer inputs are truncated (or refused)
    on_long: Literal["truncate", "error"] = "truncate"
    precision: Precision = "fp32"  # bf16: the large linear maps multiply in bfloat16
    stopping: str = "exact"  # when beam search ends a sentence (aiayn.decode.beam.STOPPING)
    # how text meets the model (Translator.translate):
    text: TextMode = "natural"  # raw: each line to the subword model as it is (research)
    split_sentences: bool = True  # natural: translate a line's sentences one by one
    format: TextFormat = "text"  # html: each line is an HTML document (aiayn.text.html)

    def __post_init__(self) -> None:
        """Refuse values the search cannot use, as the command line's options do.

        Raises:
            TranslationError: naming the field, its value and what is allowed.
        """
        for name, minimum in (
            ("beam", 1),
            ("nbest", 1),
            ("max_len_b", 0),
            ("batch_tokens", 1),
            ("max_src_len", 2),
        ):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
                raise TranslationError(
                    f"SearchOptions.{name} = {value!r}: expected a whole number of at least "
                    f"{minimum}"
                )
        if self.beam > MAX_BEAM:
            raise TranslationError(f"SearchOptions.beam = {self.beam}: at most {MAX_BEAM}")
        if self.nbest > self.beam:
            raise TranslationError(
                f"SearchOptions.nbest = {self.nbest} is larger than beam = {self.beam}"
            )
        alpha = self.alpha
        if alpha is not None and (
            isinstance(alpha, bool)
            or not isinstance(alpha, int | float)
            or not math.isfinite(alpha)
            or alpha < 0
        ):
            raise TranslationError(
                f"SearchOptions.alpha = {alpha!r}: expected None or a finite number >= 0"
            )
        for name, allowed in (
            ("on_long", ("truncate", "error")),
            ("precision", get_args(Precision)),
            ("stopping", tuple(STOPPING)),
        ):
            if getattr(self, name) not in allowed:
                raise TranslationError(
                    f"SearchOptions.{name} = {getattr(self, name)!r}: expected one of "
                    f"{', '.join(allowed)}"
                )


MAX_BEAM = 1024  # a larger beam is a mistake (its memory grows with beam × vocabulary)


@dataclass(frozen=True)
class Translation:
    """One translation: its text, its length-normalised log-probability and its target ids."""

    text: str
    score: float  # length-normalised log-probability (0.0 for greedy and empty input)
    tokens: list[int]


class Translator:
    """A model with its source and target tokenizers.

    ``packed=False``: decode through the model's own weights, not a packed copy
    (``aiayn.decode.stepper_for``), for a model that is still training.
    """

    def __init__(
        self,
        model: Transformer,
        src_tokenizer: Tokenizer,
        tgt_tokenizer: Tokenizer,
        *,
        pretokenized: bool = False,
        languages: tuple[str, str] = ("", ""),
        preprocessing: tuple[Preprocessing, Preprocessing] = (NO_PREPROCESSING, NO_PREPROCESSING),
        packed: bool = True,
    ):
        self.model = model.eval()
        self.src_tokenizer = src_tokenizer
        self.tgt_tokenizer = tgt_tokenizer
        self.pretokenized = pretokenized
        self.src_lang, self.tgt_lang = languages  # ISO codes, when the model directory says
        # what the training text went through, per side (tokenizer.json)
        self.src_text = TextProcessor(preprocessing[0], self.src_lang)
        self.tgt_text = TextProcessor(preprocessing[1], self.tgt_lang)
        self.packed = packed
        self._steppers: dict[str, tuple[tuple, StepDecoder]] = {}  # by precision

    @classmethod
    def from_dir(
        cls, directory: str | Path, *, device: str = "cpu", profile: str | Profile | None = None
    ) -> Translator:
        """Load a model directory written by training or ``aiayn average``."""
        model, cfg = load_model(directory, device=device, profile=profile)
        if not isinstance(model, Transformer):
            raise TranslationError(f"{directory}: a language model, not a translation model")
        src, tgt, info = load_tokenizers(directory)
        check_vocabularies(directory, info, cfg)
        return cls(
            model,
            src,
            tgt,
            pretokenized=info.pretokenized,
            languages=(info.src_lang, info.tgt_lang),
            preprocessing=(info.src_preprocessing, info.tgt_preprocessing),
        )

    def token_id(self, token: str) -> int:
        """The source vocabulary's id of one whole token.

        Raises:
            TranslationError: the vocabulary does not have it (the message lists a few
                target-language tokens it has, if any).
        """
        found = self.src_tokenizer.piece_id(token)
        if found is not None:
            return found
        known = [p for p in getattr(self.src_tokenizer, "ids", {}) if p.startswith(">>")]
        hint = f"; it has {', '.join(sorted(known)[:8])}" if known else ""
        raise TranslationError(f"the model's vocabulary has no token {token!r}{hint}")

    def check(self, options: SearchOptions) -> None:
        """Refuse options this model cannot decode with, before any work.

        Raises:
            TranslationError: the beam is too large for the vocabulary.
        """
        vocab = self.model.output.weight.size(0)
        if options.beam > 1 and 2 * options.beam > vocab:
            raise TranslationError(
                f"beam {options.beam} is too large for a vocabulary of {vocab} "
                f"(at most {vocab // 2})"
            )

    def _check_ids(self, sources: Sequence[Sequence[int]]) -> None:
        if isinstance(sources, str | bytes) or not isinstance(sources, Sequence):
            raise TranslationError(
                f"sources: expected a list of id sequences, got {type(sources).__name__}"
            )
        vocab = self.model.src_embed.tokens.weight.size(0)
        for n, row in enumerate(sources, 1):
            if isinstance(row, torch.Tensor):
                row = row.tolist()
            if isinstance(row, str | bytes) or not isinstance(row, Sequence):
                raise TranslationError(
                    f"source {n}: expected a sequence of ids, got {type(row).__name__}"
                )
            for i in row:
                if isinstance(i, bool) or not isinstance(i, int) or not 0 <= i < vocab:
                    raise TranslationError(
                        f"source {n}: {i!r} is not an id of the source vocabulary (0..{vocab - 1})"
                    )

    @property
    def device(self) -> torch.device:
        return next(self.model.parameters()).device

    def translate(
        self,
        lines: Sequence[str],
        options: SearchOptions = SearchOptions(),
        *,
        warn: Callable[[str], None] = LOGGER.warning,
        target_token: str | None = None,
    ) -> list[list[Translation]]:
        """The ``options.nbest`` translations of every line, in input order.

        ``options.text``: "natural" (the default) prepares every input as the model's
        training text was prepared (``tokenizer.json``'s preprocessing record) and restores
        every output to natural text; with ``options.split_sentences`` a line is cut at
        its line breaks and between its sentences, all sentences of all lines are
        translated in one batch and each line is joined back with its own spacing (the
        k-th hypothesis of a line joins its sentences' k-th; its score is their mean).
        ``options.format`` "html": each line is an HTML document (``aiayn.text.html``).
        "raw" gives each stripped line to the subword model as it is and returns what the
        model decoded (research: scoring on tokenised text).

        Empty lines give one empty translation. Sentences longer than ``max_src_len``
        subwords are truncated with a warning, or refused, by ``options.on_long``. A
        ``target_token`` (a multilingual model's ``>>fra<<``) goes before every non-empty
        sentence.
        """
        _check_lines(lines)
        _check_options(options)
        _check_text_options(options)
        if options.text == "raw":
            return self._translate_texts(
                [line.strip() for line in lines], options, warn, target_token
            )
        html = options.format == "html"
        documents = [HtmlText(line) for line in lines] if html else []
        units = [t for d in documents for t in d.texts] if html else list(lines)
        unit_lines = (
            [n for n, d in enumerate(documents, 1) for _ in d.texts]
            if html
            else list(range(1, len(units) + 1))
        )
        paragraphs = [
            split_paragraph(u, self.src_lang, split=options.split_sentences) for u in units
        ]
        sources = [self.src_text.prepare(s) for p in paragraphs for s in p.sentences]
        places = [
            f"line {n}" if len(p.sentences) == 1 else f"line {n}, sentence {k}"
            for n, p in zip(unit_lines, paragraphs, strict=True)
            for k in range(1, len(p.sentences) + 1)
        ]
        found = self._translate_texts(sources, options, warn, target_token, places)
        joined = _join(paragraphs, found, self.tgt_text.restore, options.nbest)
        if not html:
            return joined
        results, start = [], 0
        for document in documents:
            end = start + len(document.texts)
            text = document.render([hyps[0].text for hyps in joined[start:end]])
            results.append([Translation(text, 0.0, [])])
            start = end
        return results

    def _translate_texts(
        self,
        texts: list[str],
        options: SearchOptions,
        warn,
        target_token: str | None,
        places: list[str] | None = None,
    ) -> list[list[Translation]]:
        """Translate ``texts`` as the subword model reads them; ``places`` names each in a
        warning or error (default: "line N", N counted from 1)."""
        ids = self.src_tokenizer.encode(texts)
        if target_token is not None:
            prefix = self.token_id(target_token)
            ids = [[prefix, *row] if row else row for row in ids]
        if places is None:
            places = [f"line {n}" for n in range(1, len(ids) + 1)]
        ids = [self._fit(place, row, options, warn) for place, row in zip(places, ids, strict=True)]
        return self.translate_ids(ids, options)

    def translate_ids(
        self,
        sources: Sequence[Sequence[int]],
        options: SearchOptions = SearchOptions(),
    ) -> list[list[Translation]]:
        """Translate subword ids (without EOS); an empty source gives an empty translation.

        Raises:
            TranslationError: a source that is not a sequence of ids of the vocabulary, or
                options this model cannot decode with.
        """
        _check_options(options)
        self.check(options)
        self._check_ids(sources)
        results: list[list[Translation]] = [[Translation("", 0.0, [])] for _ in sources]
        todo = [i for i, row in enumerate(sources) if len(row)]
        lengths = [len(row) + 1 for row in sources]
        stepper = self._stepper(options.precision)
        for batch in _length_batches(todo, lengths, options.batch_tokens):
            eos, pad = self.model.specials.eos, self.model.specials.pad
            src = _pad([[*sources[i], eos] for i in batch], pad).to(self.device)
            for i, hyps in zip(batch, self._search(stepper, src, options), strict=True):
                results[i] = hyps
        return results

    def _fit(self, place: str, row: list[int], options: SearchOptions, warn) -> list[int]:
        if len(row) < options.max_src_len:
            return row
        message = f"{place}: {len(row)} subwords, more than --max-src-len"
        if options.on_long == "error":
            raise TranslationError(message)
        warn(f"{message}; truncated to {options.max_src_len - 1}")
        return row[: options.max_src_len - 1]

    def weights_changed(self) -> None:
        """Forget the steppers kept for the model's weights: call it after changing them in
        place (a fast stepper decodes through a packed copy taken when it was made)."""
        self._steppers.clear()

    def _stepper(self, precision: Precision) -> StepDecoder:
        """The model's stepper in ``precision``, kept until the parameters are replaced or
        moved, or ``weights_changed`` is called (a fast stepper packs them once:
        ``aiayn.accel.packed``)."""
        if precision not in get_args(Precision):
            raise TranslationError(
                f"precision {precision!r} is not one of {', '.join(get_args(Precision))} "
                "(aiayn.runtime.resolve_precision turns auto into one for a device)"
            )
        weights = tuple((id(p), p.data_ptr()) for p in self.model.parameters())  # replaced?
        kept = self._steppers.get(precision)
        if kept is None or kept[0] != weights:
            kept = (weights, stepper_for(self.model, precision=precision, packed=self.packed))
            self._steppers[precision] = kept
        return kept[1]

    def _search(
        self, stepper: StepDecoder, src: torch.Tensor, options: SearchOptions
    ) -> list[list[Translation]]:
        if options.beam == 1:
            specials = self.model.specials
            out = greedy_search(
                stepper,
                src,
                max_len_b=options.max_len_b,
                specials=specials,
                argmax=self.model.profile.argmax,
            )
            return [[self._translation(_until(specials.eos, row), 0.0)] for row in out.tolist()]
        found = beam_search(
            stepper,
            src,
            beam=options.beam,
            alpha=options.alpha,
            max_len_b=options.max_len_b,
            nbest=options.nbest,
            extensions=self.model.profile.extensions,
            specials=self.model.specials,
            stopping=options.stopping,
        )
        return [[self._translation(h.tokens, h.score) for h in hyps] for hyps in found]

    def _translation(self, tokens: list[int], score: float) -> Translation:
        return Translation(self.tgt_tokenizer.decode(tokens), score, tokens)


def _check_text_options(options: SearchOptions) -> None:
    if options.text not in get_args(TextMode):
        raise TranslationError(f"text {options.text!r} is not one of natural, raw")
    if options.format not in get_args(TextFormat):
        raise TranslationError(f"format {options.format!r} is not one of text, html")


def _join(
    paragraphs: list[Paragraph],
    found: list[list[Translation]],
    restore: Callable[[str], str],
    nbest: int,
) -> list[list[Translation]]:
    """Each paragraph's translations: its sentences' restored hypotheses in its spacing."""
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
            text = paragraph.join([restore(t.text) for t in chosen])
            score = sum(t.score for t in chosen) / len(chosen)
            hyps.append(Translation(text, score, [i for t in chosen for i in t.tokens]))
        results.append(hyps)
    return results


def _check_lines(lines: Sequence[str]) -> None:
    if isinstance(lines, str | bytes):
        raise TranslationError(
            "translate() takes a list of lines, not one string: pass [text] to translate one"
        )
    if not isinstance(lines, Sequence):
        raise TranslationError(f"translate() takes a list of lines, not {type(lines).__name__}")
    for n, line in enumerate(lines, 1):
        if not isinstance(line, str):
            raise TranslationError(f"line {n}: expected text (str), got {type(line).__name__}")


def _check_options(options: SearchOptions) -> None:
    if not isinstance(options, SearchOptions):
        raise TranslationError(
            f"options: expected a SearchOptions, got {type(options).__name__} "
            "(write SearchOptions(beam=4, ...))"
        )


def _until(eos: int, row: list[int]) -> list[int]:
    return row[: row.index(eos)] if eos in row else row


def _length_batches(indices: list[int], lengths: list[int], batch_tokens: int) -> list[list[int]]:
    """Group ``indices`` by length so each batch's padded size stays under ``batch_tokens``,
    longest first: the last, partly filled batch then holds the shortest sentences, which
    end in the fewest steps, not the longest, which would decode the most steps with the
    fewest rows (test2016, trained tiny model, greedy bf16: 8-14% faster, beam 5 level)."""
    batches: list[list[int]] = []
    current: list[int] = []
    for i in sorted(indices, key=lambda i: lengths[i], reverse=True):
        if current and (len(current) + 1) * lengths[current[0]] > batch_tokens:
            batches.append(current)
            current = []
        current.append(i)
    if current:
        batches.append(current)
    return batches


def _pad(rows: list[list[int]], pad: int) -> torch.Tensor:
    width = max(len(r) for r in rows)
    return torch.tensor([[*r] + [pad] * (width - len(r)) for r in rows], dtype=torch.long)
