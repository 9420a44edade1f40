"""What the commands share: the parser that reports errors in one line, range-checked option
types, output to the terminal, and the training reporter."""

from __future__ import annotations

import argparse
import math
import os
import sys
from typing import TYPE_CHECKING, Any, NoReturn

from aiayn.errors import AiaynError
from aiayn.train.metrics import Metric, Row

if TYPE_CHECKING:
    import torch


class UsageError(AiaynError):
    """Options that do not fit together, or an input the command cannot use."""


class Parser(argparse.ArgumentParser):
    """argparse, with its errors on one line (and exit status 2)."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


def log(message: str) -> None:
    """A line on standard error (output proper goes to standard output)."""
    print(message, file=sys.stderr, flush=True)


def _bounds(minimum: float | None, maximum: float | None, *, open_max: bool = False) -> str:
    if minimum is not None and maximum is not None:
        return f"{minimum:g} to {maximum:g}" + (" (exclusive)" if open_max else "")
    if minimum is not None:
        return f"at least {minimum:g}"
    return f"at most {maximum:g}"


def integer(minimum: int | None = None, maximum: int | None = None):
    """An argparse type: a whole number in [minimum, maximum]."""

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}") from None
        if (minimum is not None and value < minimum) or (maximum is not None and value > maximum):
            raise argparse.ArgumentTypeError(
                f"{value} is out of range (allowed: {_bounds(minimum, maximum)})"
            )
        return value

    parse.__name__ = "integer"
    return parse


def number(minimum: float | None = None, maximum: float | None = None, *, below_max=False):
    """An argparse type: a finite number in [minimum, maximum] ([minimum, maximum) with
    ``below_max``)."""

    def parse(text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None
        too_low = minimum is not None and value < minimum
        too_high = maximum is not None and (value >= maximum if below_max else value > maximum)
        if not math.isfinite(value) or too_low or too_high:
            allowed = _bounds(minimum, maximum, open_max=below_max)
            raise argparse.ArgumentTypeError(f"{text} is out of range (allowed: {allowed})")
        return value

    parse.__name__ = "number"
    return parse


# More CPU threads than this is a mistake (PyTorch crashes creating 100,000 of them).
MAX_THREADS = max(256, 4 * (os.cpu_count() or 1))

STOPPING_RULES = ["exact", "beams", "heuristic"]  # aiayn.decode.beam.STOPPING, without torch


def add_search_options(parser: argparse.ArgumentParser) -> None:
    """The decoding options ``aiayn translate`` and ``aiayn serve`` share, with the same
    defaults: beam search as the Multi30k recipe runs it (§6.1), fp32, on the CPU."""
    parser.add_argument(
        "--beam", type=integer(minimum=1), default=5, help="beam size; 1 is greedy (default 5)"
    )
    parser.add_argument(
        "--alpha", type=number(minimum=0.0), default=0.6, help="length penalty α (0: none)"
    )
    parser.add_argument(
        "--stopping",
        choices=STOPPING_RULES,
        default="exact",
        help="when beam search ends a sentence: exact (no live beam can still win), beams "
        "(beam-size hypotheses finished: fairseq, CTranslate2) or heuristic (the best live "
        "beam scored at its current length: Hugging Face); beams and heuristic are faster "
        "(default exact)",
    )
    parser.add_argument(
        "--batch-tokens",
        type=integer(minimum=1),
        default=4096,
        help="padded source tokens decoded together at most",
    )
    parser.add_argument(
        "--precision",
        choices=["fp32", "bf16", "auto"],
        default="fp32",
        help="bf16: the large matrix products in bfloat16 (faster on CPUs with AVX512-BF16 or "
        "AMX, emulated and far slower on others); auto: bf16 where the hardware has it",
    )
    parser.add_argument("--device", default="cpu", help="cpu, cuda, cuda:N or mps")
    parser.add_argument(
        "--text",
        choices=["natural", "raw"],
        default="natural",
        help="natural: inputs prepared as the model's training text was (its tokenizer.json: "
        "Moses steps, lowercasing) and outputs restored to natural text; raw: text to and "
        "from the subword model untouched, one sentence a line (research: tokenised scoring)",
    )
    parser.add_argument(
        "--split-sentences",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="natural text: translate each sentence of a line (or request) on its own, "
        "joined back with the line's spacing (default: on)",
    )
    add_term_options(parser)


def add_term_options(parser: argparse.ArgumentParser) -> None:
    """Protected spans, glossary and minimum confidence (``aiayn translate`` and ``aiayn
    serve``, where they are the requests' defaults)."""
    parser.add_argument(
        "--no-protect",
        dest="protect",
        action="store_false",
        help="natural text: translate placeholders ({{x}}, {x}, %%s, %%(name)s, $VAR, ${x}), "
        "inline code, URLs and e-mail addresses like any text (default: kept verbatim)",
    )
    parser.add_argument(
        "--protect",
        dest="protect_patterns",
        metavar="REGEX",
        action="append",
        default=[],
        help="also keep verbatim what this regular expression matches (repeatable)",
    )
    parser.add_argument(
        "--glossary",
        metavar="FILE",
        help="TSV, one 'source term<TAB>target term' a line: the target term is imposed where "
        "the source term occurs (whole words, any case; see docs/how-to/glossary.md)",
    )
    parser.add_argument(
        "--min-confidence",
        type=number(minimum=0.0, maximum=1.0),
        default=0.0,
        metavar="X",
        help="a line translated with a confidence below X (0 to 1) is given back as its "
        "source, flagged (default 0: every translation kept)",
    )


def term_options(args: argparse.Namespace) -> dict[str, Any]:
    """The ``SearchOptions`` fields of ``add_term_options``' options, the glossary read.

    Raises:
        GlossaryError: the glossary file cannot be used (one line).
    """
    from aiayn.text.glossary import read_glossary

    return {
        "protect": args.protect,
        "protect_patterns": tuple(args.protect_patterns),
        "glossary": read_glossary(args.glossary) if args.glossary else None,
        "min_confidence": args.min_confidence,
    }


def search_precision(requested: str, device: torch.device) -> str:
    """The precision to decode in on ``device`` (``auto`` resolved), warning on stderr when
    bf16 would be emulated."""
    from aiayn.runtime import emulated_bfloat16_warning, resolve_precision

    precision = resolve_precision(requested, device)
    if warning := emulated_bfloat16_warning(precision, device):
        log(warning)
    return precision


def one_line(error: BaseException) -> str:
    return " ".join(str(error).split())


class TerminalReporter:
    """Shows a training run: a progress bar with ETA when standard error is a terminal,
    log lines otherwise."""

    def __init__(self) -> None:
        self._bar: Any = None
        self._interactive = sys.stderr.isatty()

    def log(self, message: str) -> None:
        if self._bar is not None:
            self._bar.write(message, file=sys.stderr)
        else:
            log(message)

    def progress(self, update: int, total: int, row: Row | None) -> None:
        if not self._interactive:
            return
        if self._bar is None:
            from tqdm import tqdm

            self._bar = tqdm(
                total=total, initial=update - 1, unit="upd", dynamic_ncols=True, file=sys.stderr
            )
        self._bar.update(update - self._bar.n)
        if row is not None:
            self._bar.set_postfix(
                loss=f"{row[Metric.LOSS]:.3f}",
                lr=f"{row[Metric.LR]:.2e}",
                tok_s=f"{row[Metric.TOKENS_PER_S]:,.0f}",
                refresh=False,
            )

    def close(self) -> None:
        if self._bar is not None:
            self._bar.close()
            self._bar = None
