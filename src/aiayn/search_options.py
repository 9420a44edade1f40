"""How text is decoded: ``SearchOptions``, one frozen value every surface reads.

Every command that decodes (``aiayn translate``, ``serve``, ``calibrate``, ``distill``,
``plot attention``) generates its decoding options from its fields
(``aiayn.cli.common.add_search_options``), the server holds one as ``ServeSettings.decode``
and changes its per-request fields with ``dataclasses.replace``
(``aiayn.serve.checks.requested_options``), and a pipeline recipe holds one as
``PipelineConfig.decode`` (``[pipeline]`` keys named as its fields). ``Translator.translate``
takes one.

Imports no torch, so configs and command lines read it without loading a model.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal, Protocol, get_args, runtime_checkable

from aiayn.checks import Flag, Number, OneOf, Rule, Whole, check
from aiayn.errors import ConfigError

STOPPING = {  # when a sentence's beam search ends, besides its maximum length
    "exact": "no live beam can still beat the n-th best finished hypothesis, at any length "
    "up to the maximum",
    "beams": "K hypotheses have finished (fairseq's and CTranslate2's rule; Hugging Face's "
    "early_stopping=True)",
    "heuristic": "the best live beam, scored at its current length, cannot beat the n-th best "
    "finished hypothesis (Hugging Face's default, early_stopping=False)",
}
MAX_BEAM = 1024  # a larger beam is a mistake (its memory grows with beam × vocabulary)

TextMode = Literal["natural", "raw"]
TextFormat = Literal["text", "html"]
# auto: bf16 where the device computes it; int8: every linear map in int8 (CPU, fast profile)
SearchPrecision = Literal["fp32", "bf16", "int8", "auto"]
OnLong = Literal["truncate", "error"]
AllCaps = Literal["restore", "known", "off"]
# the commands whose options are generated from the fields: a field's default ``commands``,
# those that translate text with every option; distill and plot take the search's own
COMMANDS = ("translate", "serve", "calibrate")
SEARCH = (*COMMANDS, "distill")  # the beam search's settings, also for distillation


def option(
    default: Any,
    help: str,
    rule: Rule,
    *,
    request: str | None = None,
    commands: tuple[str, ...] = COMMANDS,
    flag: str | None = None,
    metavar: str | None = None,
    nargs: str | None = None,
    read: Callable[[Any], Any] | None = None,
) -> Any:
    """A field of ``SearchOptions`` (or of ``aiayn.serve.settings.ServeSettings``): its
    default, its help text (the command-line option's), the rule its values follow
    (``aiayn.checks``), the name a server request sets it by (None: the server's setting
    holds for every request), the commands that offer it as ``--field-name`` (or as
    ``flag``: ``--no-protect`` turns a default-true flag off; ``metavar`` names its value in
    ``--help``; ``nargs="*"``: the values follow the flag; ``read`` makes the field's value
    of what the command line gives, e.g. a file's keys)."""
    metadata = {
        "help": help,
        "rule": rule,
        "request": request,
        "commands": commands,
        "flag": flag,
        "metavar": metavar,
        "nargs": nargs,
        "read": read,
    }
    return dataclasses.field(default=default, metadata=metadata)


@dataclass(frozen=True)
class Texts:
    """A tuple of non-empty strings (the command line's repeated option)."""

    def problem(self, value: Any) -> str | None:
        if isinstance(value, tuple) and all(isinstance(v, str) and v for v in value):
            return None
        return f"must be a tuple of non-empty strings, got {value!r}"

    def parse(self, text: str) -> tuple[str, ...]:
        return (text,)


@dataclass(frozen=True)
class OffOrAtLeast(Whole):
    """0 (off), or a whole number of at least ``least``."""

    minimum: int | None = 0
    least: int = 2

    def describe(self) -> str:
        return f"0 (off) or a whole number of at least {self.least}"

    def problem(self, value: Any) -> str | None:
        problem = super().problem(value)
        if problem is None and 0 < value < self.least:
            return f"must be {self.describe()}, got {value!r}"
        return problem


@runtime_checkable
class TermList(Protocol):
    """What a glossary is to the search (``aiayn.text.glossary.Glossary``)."""

    terms: tuple

    def matches(self, sentence: str) -> list: ...


@dataclass(frozen=True)
class Terms:
    """None, or a glossary (``TermList``); on the command line, a file of terms that the
    command reads (``aiayn.cli.common``)."""

    def problem(self, value: Any) -> str | None:
        if value is None or isinstance(value, TermList):
            return None
        return (
            f"must be an aiayn.text.glossary.Glossary (read_glossary(path) or "
            f"Glossary.from_pairs(pairs)), got {type(value).__name__}"
        )

    def parse(self, text: str) -> Any:
        raise ValueError("a glossary is a file of terms, read by the command that takes it")


@dataclass(frozen=True, kw_only=True)
class SearchOptions:
    """How ``Translator.translate`` decodes: beam width (1 is greedy search), length penalty,
    n-best, output length, batching, precision, the beam search's stopping rule, and how
    text meets the model. The defaults are the paper's decoding (§6.1: beam search, α 0.6,
    up to the source length + 50) with three guards against input unlike the training data
    (``max_len_ratio``, ``repeat_stop``, ``all_caps``: ``aiayn.decode.guards``,
    ``aiayn.text.case``), each switched off by 0 or "off".

    Adding an option is one field here (plus its use, usually in ``Translator``): declare it
    with ``option(default, help, rule)``. The rule (``aiayn.checks``: ``Whole``, ``Number``,
    ``OneOf``, ``Flag``) checks it in ``__post_init__`` and parses it from text. From the
    field, with nothing else to edit, the commands that decode (``COMMANDS``) get
    ``--field-name`` with the default and the help text (``commands=`` chooses them), a
    pipeline recipe accepts ``field_name = ...`` in ``[pipeline]``, and with
    ``request=True`` a server request may set it by its name (checked by the same rule);
    tests/test_search_options.py walks the fields and finds each on every surface.
    """

    beam: int = option(
        5, "beam size; 1 is greedy search", Whole(1, MAX_BEAM), commands=(*SEARCH, "plot")
    )
    alpha: float = option(0.6, "length penalty α (§6.1); 0: none", Number(0.0), commands=SEARCH)
    nbest: int = option(
        1,
        "hypotheses per line; above 1, lines are 'N ||| text ||| score'",
        Whole(1),
        commands=("translate",),  # a server request asks for alternatives itself
    )
    max_len_b: int = option(
        50, "outputs have at most source length + this many tokens (§6.1)", Whole(0)
    )
    max_len_ratio: float = option(
        1.5,
        "length guard: outputs have at most this many times the model's target/source length "
        "ratio on its training data times the source length, + 5 tokens; 0: off",
        Number(0.0),
    )
    repeat_stop: int = option(
        4,
        "repetition stop: an output ending in this many consecutive copies of one n-gram "
        "(n <= 6) ends there; 0: off",
        OffOrAtLeast(least=2),
    )
    all_caps: AllCaps = option(
        "restore",
        "a sentence in capitals is translated in the case the model knows and given back in "
        "capitals (restore) or as the model wrote it (known); off: as it is",
        OneOf(get_args(AllCaps)),
    )
    batch_tokens: int = option(
        4096, "padded source tokens decoded together at most", Whole(1), commands=SEARCH
    )
    max_src_len: int = option(
        1024,
        "inputs longer than this many subwords (EOS included) are truncated or refused",
        Whole(2),
    )
    on_long: OnLong = option(
        "truncate", "what happens to an input longer than --max-src-len", OneOf(get_args(OnLong))
    )
    precision: SearchPrecision = option(
        "fp32",
        "bf16: the large matrix products in bfloat16 (faster on CPUs with AVX512-BF16 or AMX, "
        "emulated and far slower on others); int8: every linear map in int8 (CPU only, fast "
        "profile: faster on any x86 CPU); auto: bf16 where the hardware has it",
        OneOf(get_args(SearchPrecision)),
        commands=SEARCH,
    )
    shortlist: int = option(
        0,
        "vocabulary shortlist: each batch decodes over the K likeliest target pieces of each "
        "of its source pieces, the most frequent ones and the specials (the model "
        "directory's table, from aiayn shortlist): faster at large vocabularies; 0: the "
        "whole vocabulary",
        Whole(0),
        metavar="K",
    )
    stopping: str = option(
        "exact",
        "when beam search ends a sentence: exact (no live beam can still win), beams "
        "(beam-size hypotheses finished: fairseq, CTranslate2) or heuristic (the best live "
        "beam scored at its current length: Hugging Face); beams and heuristic are faster",
        OneOf(tuple(STOPPING)),
        commands=SEARCH,
    )
    text: TextMode = option(
        "natural",
        "natural: inputs prepared as the model's training text was (its tokenizer.json: "
        "Moses steps, lowercasing) and outputs restored to natural text; raw: text to and "
        "from the subword model untouched, one sentence a line (research: tokenised scoring)",
        OneOf(get_args(TextMode)),
    )
    split_sentences: bool = option(
        True,
        "natural text: translate each sentence of a line (or request) on its own, joined back "
        "with the line's spacing",
        Flag(),
    )
    format: TextFormat = option(
        "text",
        "html: each line is an HTML document; its text is translated, its markup kept",
        OneOf(get_args(TextFormat)),
        request="format",
        commands=(),  # aiayn translate's --format also names document formats: its own
    )
    protect: bool = option(
        True,
        "natural text: keep placeholders ({{x}}, {x}, %s, %(name)s, $VAR, ${x}), inline code, "
        "URLs and e-mail addresses verbatim (aiayn.text.protect)",
        Flag(),
        request="protect_spans",
        flag="--no-protect",
    )
    impose_spans: bool = option(
        False,
        "impose each protected span's sentinel on the beam search (placed by the model even "
        "where it would drop it, at a cost in the rest of the sentence: "
        "docs/how-to/protected-spans.md)",
        Flag(),
        request="impose_spans",
    )
    protect_patterns: tuple[str, ...] = option(
        (),
        "also keep verbatim what this regular expression matches (repeatable)",
        Texts(),
        request="protect",  # a request's patterns join the server's
        flag="--protect",
        metavar="REGEX",
    )
    glossary: Any = option(
        None,
        "TSV, one 'source term<TAB>target term' a line: the target term is imposed where "
        "the source term occurs (whole words, any case; see docs/how-to/glossary.md)",
        Terms(),
        request="glossary",  # a request's terms join the server's
        metavar="FILE",
    )
    min_confidence: float = option(
        0.0,
        "a line translated with a confidence below X (0 to 1) is given back as its source, "
        "flagged (0: every translation kept)",
        Number(0.0, 1.0),
        request="min_confidence",
        metavar="X",
    )
    retranslate: bool = option(
        False,
        "localisation files (PO, XLIFF): translate the units that hold a translation "
        "already too (default: they are kept as they are)",
        Flag(),
        request="retranslate",
        commands=("translate", "serve"),
    )

    def __post_init__(self) -> None:
        """The one validation of the decoding settings, wherever they come from.

        Raises:
            ConfigError: naming the field, its value and what is allowed.
        """
        check(self, rules(SearchOptions), ConfigError, "SearchOptions.")
        if self.format == "html" and self.text == "raw":
            raise ConfigError(
                "SearchOptions.format html reads natural text out of the markup: it needs "
                "text natural, not raw"
            )
        if self.nbest > self.beam:
            raise ConfigError(f"SearchOptions.nbest {self.nbest} is larger than beam = {self.beam}")


def rules(cls: type) -> dict[str, Rule]:
    """The rule of each field of a dataclass declared with ``option``."""
    return {f.name: f.metadata["rule"] for f in dataclasses.fields(cls) if "rule" in f.metadata}
