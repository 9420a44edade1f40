"""The ``aiayn`` command line: the only place that reads argv or prints.

One module per command family, each with its parsers beside its handlers. Every error a
user can fix is an ``AiaynError``, caught here once and printed as one line (exit status 2);
anything else is a bug and keeps its traceback.
"""

from __future__ import annotations

import argparse
import contextlib
import logging
import shlex
import sys
from collections.abc import Iterator, Sequence

from aiayn import __version__
from aiayn.cli import (
    calibrate,
    data,
    distill,
    generate,
    info,
    interop,
    pipeline,
    plot,
    serve,
    shortlist,
    train,
    translate,
)
from aiayn.cli.common import Parser, one_line
from aiayn.errors import AiaynError

COMMAND_FAMILIES = (
    info,
    data,
    train,
    translate,
    calibrate,
    distill,
    shortlist,
    pipeline,
    plot,
    generate,
    interop,
    serve,
)


def build_parser() -> Parser:
    parser = Parser(prog="aiayn", description="The Transformer of 'Attention Is All You Need'.")
    parser.add_argument("--version", action="version", version=f"aiayn {__version__}")
    sub = parser.add_subparsers(
        dest="command", required=True, metavar="COMMAND", parser_class=Parser
    )
    for family in COMMAND_FAMILIES:
        family.add_parsers(sub)
    return parser


class _StderrHandler(logging.StreamHandler):
    """Writes to whatever ``sys.stderr`` is when a message comes (tests swap it)."""

    @property
    def stream(self):
        return sys.stderr

    @stream.setter
    def stream(self, value) -> None:
        pass


@contextlib.contextmanager
def command_logging() -> Iterator[None]:
    """Show the library's ``aiayn`` log messages (INFO and up) on stderr, one a line, as the
    command's own (what a reporter or a warning callback does not print itself), for the
    command's duration only: a program that calls ``main`` keeps its logging as it was, and
    one that gave the ``aiayn`` logger handlers of its own keeps just those."""
    logger = logging.getLogger("aiayn")
    if logger.handlers:
        yield
        return
    handler = _StderrHandler()
    handler.setFormatter(logging.Formatter("%(message)s"))
    level = logger.level
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    try:
        yield
    finally:
        logger.removeHandler(handler)
        logger.setLevel(level)


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    args.command_line = shlex.join(["aiayn", *(sys.argv[1:] if argv is None else argv)])
    with command_logging():
        return _run(args)


def _run(args: argparse.Namespace) -> int:
    try:
        return args.handler(args)
    except AiaynError as e:
        print(f"aiayn {args.command}: error: {one_line(e)}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"aiayn {args.command}: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:  # the reader went away (e.g. `aiayn translate | head`)
        sys.stderr.close()
        return 141
