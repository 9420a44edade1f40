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

from aiayn.checks import Flag, Maybe, Number, OneOf, Rule, Whole
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


def add_search_options(
    parser: argparse.ArgumentParser, command: str, base: SearchOptions | None = None
) -> None:
    """The decoding options of ``command``, one per field of ``SearchOptions`` that the
    command offers (its ``commands``), with the default (``base``'s value, else the field's)
    and help text; and ``--device`` where the command loads a model for itself."""
    add_fields(parser, SearchOptions, command, base)
    if command in ("translate", "calibrate"):
        parser.add_argument("--device", default="cpu", help="cpu, cuda, cuda:N or mps")


def add_fields(parser: argparse.ArgumentParser, cls: type, command: str, base=None) -> None:
    """One option per field of the dataclass ``cls`` declared with
    ``aiayn.search_options.option`` that ``command`` offers: ``--field-name`` (or its
    ``flag``), its default (``base``'s value, else the field's), its help, and its rule as
    the option's type or choices."""
    for field in dataclasses.fields(cls):
        if command not in field.metadata.get("commands", ()):
            continue
        rule, metavar = field.metadata["rule"], field.metadata["metavar"]
        default = field.default if base is None else getattr(base, field.name)
        flag = field.metadata["flag"] or "--" + field.name.replace("_", "-")
        shown = f"{field.metadata['help']} (default: {_shown(default)})".replace("%", "%%")
        if isinstance(rule, Flag) and flag.startswith("--no-"):
            shown = "turn off: " + field.metadata["help"].replace("%", "%%")
        if isinstance(rule, Flag):
            action: Any = "store_false" if flag.startswith("--no-") else "store_true"
            if flag == "--" + field.name.replace("_", "-"):
                action = argparse.BooleanOptionalAction
            kinds: dict[str, Any] = {"action": action}
        elif isinstance(rule, Texts) and field.metadata["nargs"]:
            kinds, default = {"nargs": field.metadata["nargs"], "metavar": metavar}, [*default]
        elif isinstance(rule, Texts):
            kinds, default = {"action": "append", "metavar": metavar}, []
        elif isinstance(rule, OneOf | Maybe) and isinstance(getattr(rule, "rule", rule), OneOf):
            kinds = {"choices": getattr(rule, "rule", rule).choices, "metavar": metavar}
        elif isinstance(rule, Terms) or field.metadata["read"]:
            kinds = {"metavar": metavar}  # a file, read by the command (``field_values``)
        else:
            kinds = {"type": argument_type(rule), "metavar": metavar}
        parser.add_argument(flag, dest=field.name, default=default, help=shown, **kinds)


def field_values(args: argparse.Namespace, cls: type) -> dict[str, Any]:
    """The values of ``cls``'s fields that ``args`` holds (the options ``add_fields`` made),
    as the fields take them: repeated options as tuples, files read by the field's ``read``
    (a glossary by ``read_glossary``)."""
    given: dict[str, Any] = {}
    for field in dataclasses.fields(cls):
        if not field.metadata.get("commands") or not hasattr(args, field.name):
            continue
        value, rule, read = (
            getattr(args, field.name),
            field.metadata["rule"],
            field.metadata["read"],
        )
        if isinstance(rule, Texts):
            value = tuple(value)
        elif isinstance(rule, Terms) and value is not None:
            value = read_glossary(value)
        elif read is not None and value is not None:
            value = read(value)
        given[field.name] = value
    return given


def _shown(default: object) -> str:
    if isinstance(default, bool):
        return "on" if default else "off"
    return "none" if default in (None, ()) else str(default)


def search_options(
    args: argparse.Namespace, base: SearchOptions | None = None, **changes: Any
) -> SearchOptions:
    """The ``SearchOptions`` the command line asks for (fields a command does not offer
    keep ``base``'s values, else their defaults; a glossary file is read), with ``changes``
    made.

    Raises:
        UsageError: options that do not fit together (``--nbest`` above ``--beam``).
        GlossaryError: the glossary file cannot be used (one line).
    """
    given = {k: v for k, v in field_values(args, SearchOptions).items() if k not in changes}
    try:
        return dataclasses.replace(base or SearchOptions(), **given, **changes)
    except ConfigError as e:
        raise UsageError(options_named(e, SearchOptions)) from None


def options_named(error: ConfigError, cls: type) -> str:
    """A ``ConfigError`` of a dataclass whose fields are options (``add_fields``), naming
    each field by its option (``SearchOptions.nbest`` -> ``--nbest``,
    ``SearchOptions.protect_patterns`` -> ``--protect``)."""
    flags = {f.name: f.metadata.get("flag") for f in dataclasses.fields(cls)}

    def flag(found: re.Match) -> str:
        return flags.get(found[1]) or "--" + found[1].replace("_", "-")

    return re.sub(rf"{cls.__name__}\.(\w+)", flag, str(error))


def search_precision(requested: str, device: torch.device) -> str:
    """The precision to decode in on ``device`` (``auto`` resolved), warning on stderr when
    bf16 would be emulated."""
    from aiayn.runtime import decoding_precision, emulated_bfloat16_warning

    precision = decoding_precision(requested, device)
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
