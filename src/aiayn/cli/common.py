"""What the commands share: the parser that reports errors in one line, range-checked option
types, output to the terminal, and the training reporter."""

from __future__ import annotations

import argparse
import dataclasses
import os
import re
import sys
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, NoReturn

from aiayn.checks import Flag, Number, OneOf, Rule, Whole
from aiayn.errors import AiaynError, ConfigError
from aiayn.search_options import SearchOptions, Terms, Texts
from aiayn.text.glossary import read_glossary
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


def argument_type(rule: Rule) -> Callable[[str], Any]:
    """An argparse type reading a value by ``rule`` (``aiayn.checks``)."""

    def parse(text: str) -> Any:
        try:
            return rule.parse(text)
        except ValueError as e:
            raise argparse.ArgumentTypeError(str(e)) from None

    parse.__name__ = "integer" if isinstance(rule, Whole) else "number"
    return parse


def integer(minimum: int | None = None, maximum: int | None = None) -> Callable[[str], Any]:
    """An argparse type: a whole number in [minimum, maximum]."""
    return argument_type(Whole(minimum, maximum))


def number(
    minimum: float | None = None, maximum: float | None = None, *, below_max: bool = False
) -> Callable[[str], Any]:
    """An argparse type: a finite number in [minimum, maximum] ([minimum, maximum) with
    ``below_max``)."""
    return argument_type(Number(minimum, maximum, below=below_max))


# More CPU threads than this is a mistake (PyTorch crashes creating 100,000 of them).
MAX_THREADS = max(256, 4 * (os.cpu_count() or 1))


def add_search_options(parser: argparse.ArgumentParser, command: str) -> None:
    """The decoding options of ``command`` (translate, serve), one per field of
    ``SearchOptions`` that the command offers, with its default and help text; and
    ``--device``."""
    for field in dataclasses.fields(SearchOptions):
        if command not in field.metadata["commands"]:
            continue
        rule, default, metavar = field.metadata["rule"], field.default, field.metadata["metavar"]
        flag = field.metadata["flag"] or "--" + field.name.replace("_", "-")
        shown = f"{field.metadata['help']} (default: {_shown(default)})".replace("%", "%%")
        if isinstance(rule, Flag) and flag.startswith("--no-"):
            shown = "turn off: " + field.metadata["help"].replace("%", "%%")
        if isinstance(rule, Flag):
            action: Any = "store_false" if flag.startswith("--no-") else "store_true"
            if flag == "--" + field.name.replace("_", "-"):
                action = argparse.BooleanOptionalAction
            kinds: dict[str, Any] = {"action": action}
        elif isinstance(rule, OneOf):
            kinds = {"choices": rule.choices}
        elif isinstance(rule, Texts):
            kinds, default = {"action": "append", "metavar": metavar}, []
        elif isinstance(rule, Terms):
            kinds = {"metavar": metavar}  # a file, read by search_options
        else:
            kinds = {"type": argument_type(rule), "metavar": metavar}
        parser.add_argument(flag, dest=field.name, default=default, help=shown, **kinds)
    parser.add_argument("--device", default="cpu", help="cpu, cuda, cuda:N or mps")


def _shown(default: object) -> str:
    if isinstance(default, bool):
        return "on" if default else "off"
    return "none" if default in (None, ()) else str(default)


def search_options(args: argparse.Namespace, **changes: Any) -> SearchOptions:
    """The ``SearchOptions`` the command line asks for (fields a command does not offer
    keep their defaults; a glossary file is read), with ``changes`` made.

    Raises:
        UsageError: options that do not fit together (``--nbest`` above ``--beam``).
        GlossaryError: the glossary file cannot be used (one line).
    """
    given: dict[str, Any] = {}
    for field in dataclasses.fields(SearchOptions):
        offered = field.metadata["commands"] and hasattr(args, field.name)
        if offered and field.name not in changes:
            value = getattr(args, field.name)
            if isinstance(field.metadata["rule"], Texts):
                value = tuple(value)
            elif isinstance(field.metadata["rule"], Terms) and value is not None:
                value = read_glossary(value)
            given[field.name] = value
    try:
        return SearchOptions(**given, **changes)
    except ConfigError as e:
        flag = re.sub(r"SearchOptions\.(\w+)", lambda m: "--" + m[1].replace("_", "-"), str(e))
        raise UsageError(flag) from None


def search_precision(requested: str, device: torch.device) -> str:
    """The precision to decode in on ``device`` (``auto`` resolved), warning on stderr when
    bf16 would be emulated."""
    from aiayn.runtime import check_decoding_precision, emulated_bfloat16_warning, resolve_precision

    precision = resolve_precision(requested, device)
    check_decoding_precision(precision, device)
    if warning := emulated_bfloat16_warning(precision, device):
        log(warning)
    return precision


def one_line(error: BaseException) -> str:
    return " ".join(str(error).split())


class TerminalReporter:
    """Shows a training run: a progress bar with ETA when standard error is a terminal,
    log lines otherwise (and, before the first report, a line at updates 1 and 10)."""

    EARLY = (1, 10)  # the updates a log without a bar hears of before the first report

    def __init__(self) -> None:
        self._bar: Any = None
        self._interactive = sys.stderr.isatty()
        self._start = time.perf_counter()
        self._reported = False

    def log(self, message: str) -> None:
        if self._bar is not None:
            self._bar.write(message, file=sys.stderr)
        else:
            log(message)

    def progress(self, update: int, total: int, row: Row | None) -> None:
        if not self._interactive:
            self._reported = self._reported or row is not None
            if not self._reported and update in self.EARLY:
                seconds = time.perf_counter() - self._start
                log(f"update {update:,} of {total:,} ({seconds:.1f}s since the start)")
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
