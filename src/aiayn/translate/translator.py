"""Text in, text out: tokenise, batch by length, search, detokenise, restore input order."""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Callable, Sequence
from pathlib import Path

import torch

from aiayn.accel import Profile
from aiayn.accel.profiles import stepper_for
from aiayn.accel.shortlist import Shortlist, ShortlistStepper
from aiayn.data.tokenizer import Tokenizer
from aiayn.data.tokenizer_files import check_vocabularies, load_tokenizers
from aiayn.decode.constrained import Constraints
from aiayn.models.transformer import Transformer
from aiayn.modules.stepper import Precision, StepDecoder
from aiayn.runtime import decoding_precision
from aiayn.search_options import SearchOptions
from aiayn.store import load_model
from aiayn.text.case import in_known_case, is_shouted
from aiayn.text.documents import Limits
from aiayn.text.documents.base import DEFAULT_LIMITS
from aiayn.text.preprocessing import NO_PREPROCESSING, Preprocessing, TextProcessor
from aiayn.text.protect import ProtectError
from aiayn.text.sentences import split_paragraph
from aiayn.translate.batches import length_batches, pad, search
from aiayn.translate.calibration import Calibration, read_calibration
from aiayn.translate.document_texts import translated_document
from aiayn.translate.inputs import (
    TranslationError,
    check_computes,
    check_lines,
    check_options,
    html_documents,
)
from aiayn.translate.shortlist_table import check_shortlist, load_shortlist
from aiayn.translate.terms import (
    Translation,
    calibrated,
    constraints_of,
    join,
    keep_confident,
    mark,
    render_documents,
    term_masks,
    worded_only,
)

LOGGER = logging.getLogger("aiayn")  # warnings where the caller passes no warn
UNKNOWN_LENGTH_RATIO = 1.0  # a model without one (older aiayn, imported): its pieces per
# source piece taken as 1 (a shared subword model's pieces are about as many on both sides)


class Translator:
    """A model with its source and target tokenizers.

    ``packed=False``: decode through the model's own weights, not a packed copy
    (``aiayn.accel.profiles.stepper_for``), for a model still training. ``length_ratio``:
    target pieces per source piece in training (``TokenizerInfo.length_ratio``), which the
    length guard multiplies (``SearchOptions.max_len_ratio``); None: unknown. ``calibration``:
    what ``translate`` turns each confidence into (``calibration.json``: an expected sentence
    chrF, ``aiayn.translate.calibration``); None: the model's own. ``shortlist``: the lexical
    table ``SearchOptions.shortlist`` decodes with (``aiayn.accel.shortlist``), or None.
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
        length_ratio: float | None = None,
        calibration: Calibration | None = None,
        shortlist: Shortlist | None = None,
    ):
        self.model = model.eval()
        self.calibration = calibration
        self.shortlist = shortlist
        self.length_ratio = length_ratio
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
        check_computes(model, directory)
        src, tgt, info = load_tokenizers(directory)
        check_vocabularies(directory, info, cfg)
        return cls(
            model,
            src,
            tgt,
            pretokenized=info.pretokenized,
            languages=(info.src_lang, info.tgt_lang),
            preprocessing=(info.src_preprocessing, info.tgt_preprocessing),
            length_ratio=info.length_ratio,
            calibration=read_calibration(directory),
            shortlist=load_shortlist(directory, cfg.src_vocab_size, cfg.tgt_vocab_size),
        )

    def token_id(self, token: str) -> int:
        """The source vocabulary's id of one whole token.

        Raises:
            TranslationError: not in the vocabulary (naming a few >>xx<< tokens it has).
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
            TranslationError: a beam too large for the vocabulary, or a shortlist it lacks.
        """
        vocab = self.model.output.weight.size(0)
        if options.beam > 1 and 2 * options.beam > vocab:
            raise TranslationError(
                f"beam {options.beam} is too large for a vocabulary of {vocab} "
                f"(at most {vocab // 2})"
            )
        if options.shortlist:
            check_shortlist(self.shortlist, options.shortlist, options.beam)

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
        sentence. Each confidence is calibrated when the translator has a calibration
        (``options.min_confidence`` compares the calibrated value).
        """
        check_lines(lines)
        check_options(options)
        if options.text == "raw":
            texts, shouted = self._known_case([line.strip() for line in lines], options)
            found = self._translate_texts(texts, options, warn, target_token)
            found = [
                [dataclasses.replace(h, text=h.text.upper()) for h in hyps] if loud else hyps
                for hyps, loud in zip(found, shouted, strict=True)
            ]
            return keep_confident(lines, self._calibrated(found), options.min_confidence)
        html = options.format == "html"
        documents = html_documents(lines) if html else []
        units = [t for d in documents for t in d.texts] if html else list(lines)
        unit_lines = (
            [n for n, d in enumerate(documents, 1) for _ in d.texts]
            if html
            else list(range(1, len(units) + 1))
        )
        paragraphs = [
            split_paragraph(u, self.src_lang, split=options.split_sentences) for u in units
        ]
        places = [
            f"line {n}" if len(p.sentences) == 1 else f"line {n}, sentence {k}"
            for n, p in zip(unit_lines, paragraphs, strict=True)
            for k in range(1, len(p.sentences) + 1)
        ]
        found = self._translate_sentences(
            [s for p in paragraphs for s in p.sentences], places, options, warn, target_token
        )
        joined = join(paragraphs, found, options.nbest)
        if html:
            joined = render_documents(lines, documents, joined, options.nbest)
        return keep_confident(lines, self._calibrated(joined), options.min_confidence)

    def _calibrated(self, found: list[list[Translation]]) -> list[list[Translation]]:
        """``found`` with every confidence, its sentences' too, calibrated."""
        if self.calibration is None:
            return found
        return [[calibrated(h, self.calibration) for h in hyps] for hyps in found]

    def _translate_sentences(
        self, sentences: list[str], places: list[str], options: SearchOptions, warn, target_token
    ) -> list[list[Translation]]:
        """Natural sentences' translations; one without a letter is kept (``worded_only``)."""
        return worded_only(
            sentences,
            places,
            lambda s, p: self._translate_worded(s, p, options, warn, target_token),
        )

    def _translate_worded(
        self,
        sentences: list[str],
        places: list[str],
        options: SearchOptions,
        warn,
        target_token: str | None,
    ) -> list[list[Translation]]:
        """Natural sentences' translations, restored to natural text, with their protected
        spans and glossary terms (``aiayn.translate.terms``); shouted ones in the case the
        model knows (``options.all_caps``)."""
        sentences, shouted = self._known_case(sentences, options)
        try:
            marked = mark(
                sentences,
                places,
                protect=options.protect,
                patterns=options.protect_patterns,
                glossary=options.glossary,
            )
        except ProtectError as e:
            raise TranslationError(str(e)) from None
        sources = [self.src_text.prepare(m.text) for m in marked]
        constraints = constraints_of(
            marked, self.tgt_text.prepare, self.tgt_tokenizer, warn, spans=options.impose_spans
        )
        found = self._translate_texts(sources, options, warn, target_token, places, constraints)
        return [
            [dataclasses.replace(h, text=m.finish(self._restore(h.text, loud))) for h in hyps]
            for m, hyps, loud in zip(marked, found, shouted, strict=True)
        ]

    def _restore(self, text: str, shouted: bool) -> str:
        """The model's output as natural text, in capitals where the source was shouted."""
        text = self.tgt_text.restore(text)
        return text.upper() if shouted else text

    def _known_case(self, texts: list[str], options: SearchOptions) -> tuple[list[str], list[bool]]:
        """``texts`` with the shouted ones in the case the model knows (``aiayn.text.case``),
        and which translations to give back in capitals."""
        shouted = [options.all_caps != "off" and is_shouted(t) for t in texts]
        if not any(shouted):
            return texts, shouted
        loud = [t for t, s in zip(texts, shouted, strict=True) if s]
        known = iter(in_known_case(loud, self.count_pieces))
        texts = [next(known) if s else t for t, s in zip(texts, shouted, strict=True)]
        return texts, [s and options.all_caps == "restore" for s in shouted]

    def count_pieces(self, words: list[str]) -> list[int]:
        """How many source pieces each word is cut into."""
        prepared = [self.src_text.prepare(w) for w in words]
        return [len(row) for row in self.src_tokenizer.encode(prepared)]

    def translate_document(
        self,
        data: bytes,
        format: str,
        options: SearchOptions = SearchOptions(),
        *,
        what: str = "document",
        limits: Limits = DEFAULT_LIMITS,
        warn: Callable[[str], None] = LOGGER.warning,
        target_token: str | None = None,
        target: str | None = None,
        report: Callable[[str], None] | None = None,
    ) -> bytes:
        """A whole document (``format``: a name in ``aiayn.text.documents.FORMATS``, a
        localisation file's too) translated with this model's best translations, its
        formatting kept (``aiayn.translate.document_texts.translated_document``; a
        localisation file in ``target``, default the model's target language).

        Raises:
            DocumentError: broken, hostile, of another format or over ``limits``.
        """
        return translated_document(
            lambda texts, o: self.translate(texts, o, warn=warn, target_token=target_token),
            data,
            format,
            options,
            what=what,
            limits=limits,
            target=target or self.tgt_lang,
            report=report,
        )

    def _translate_texts(
        self,
        texts: list[str],
        options: SearchOptions,
        warn,
        target_token: str | None,
        places: list[str] | None = None,
        constraints: Constraints | None = None,
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
        return self.translate_ids(ids, options, constraints=constraints)

    def translate_ids(
        self,
        sources: Sequence[Sequence[int]],
        options: SearchOptions = SearchOptions(),
        *,
        constraints: Constraints | None = None,
    ) -> list[list[Translation]]:
        """Translate subword ids (without EOS); an empty source gives an empty translation.
        ``constraints``: per source, target id sequences its translation must hold
        (``aiayn.decode.constrained``; a source with some is searched with a beam of at
        least ``GREEDY_FALLBACK_BEAM``).

        Raises:
            TranslationError: a source that is not a sequence of ids of the vocabulary, or
                options this model cannot decode with.
        """
        check_options(options)
        self.check(options)
        self._check_ids(sources)
        if constraints is not None and len(constraints) != len(sources):
            raise TranslationError(
                f"{len(constraints)} constraint lists for {len(sources)} sources"
            )
        results: list[list[Translation]] = [[Translation("", 0.0, [])] for _ in sources]
        todo = [i for i, row in enumerate(sources) if len(row)]
        held = [i for i in todo if constraints is not None and constraints[i]]
        lengths = [len(row) + 1 for row in sources]
        precision = decoding_precision(options.precision, self.device)  # auto: by the device
        stepper = self._stepper(precision)  # type: ignore[arg-type]
        for group, terms in ((sorted(set(todo) - set(held)), None), (held, constraints)):
            for batch in length_batches(group, lengths, options.batch_tokens):
                eos, padding = self.model.specials.eos, self.model.specials.pad
                src = pad([[*sources[i], eos] for i in batch], padding).to(self.device)
                batch_terms = None if terms is None else [terms[i] for i in batch]
                found = self._search(stepper, src, options, batch_terms)
                for i, hyps in zip(batch, found, strict=True):
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
        weights = tuple((id(p), p.data_ptr()) for p in self.model.parameters())  # replaced?
        kept = self._steppers.get(precision)
        if kept is None or kept[0] != weights:
            kept = (weights, stepper_for(self.model, precision=precision, packed=self.packed))
            self._steppers[precision] = kept
        return kept[1]

    def _search(
        self,
        stepper: StepDecoder,
        src: torch.Tensor,
        options: SearchOptions,
        constraints: Constraints | None = None,
    ) -> list[list[Translation]]:
        if options.shortlist and self.shortlist is not None:
            table, k, specials = self.shortlist, options.shortlist, self.model.specials
            extra = [[t for piece in terms for t in piece] for terms in constraints or ()]
            rows, allowed = table.by_sentence(src, k, specials, extra)  # each sentence its own
            stepper = ShortlistStepper(stepper, rows, self.model.output.weight.size(0), allowed)
        found = search(
            stepper,
            src,
            self.model,
            constraints,
            beam=options.beam,
            alpha=options.alpha,
            max_len_b=options.max_len_b,
            nbest=options.nbest,
            stopping=options.stopping,
            max_len_a=self._max_len_a(options),
            repeat_stop=options.repeat_stop or None,
            **(term_masks(self.tgt_tokenizer) if constraints else {}),
        )
        return [[self._translation(*h) for h in hyps] for hyps in found]

    def _max_len_a(self, options: SearchOptions) -> float | None:
        if not options.max_len_ratio:
            return None
        return options.max_len_ratio * (self.length_ratio or UNKNOWN_LENGTH_RATIO)

    def _translation(self, tokens: list[int], score: float, sure: float) -> Translation:
        return Translation(self.tgt_tokenizer.decode(tokens), score, tokens, sure)
