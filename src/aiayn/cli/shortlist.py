"""``aiayn shortlist``: a model's lexical table, for decoding with a vocabulary shortlist."""

from __future__ import annotations

import argparse

from aiayn.cli.common import integer, log


def add_parsers(sub) -> None:
    s = sub.add_parser(
        "shortlist",
        help="build a model's vocabulary shortlist table from its training corpus",
        description="Writes MODEL/shortlist.safetensors: per source piece, its likeliest "
        "target pieces (IBM Model 1 on the corpus), and the most frequent target pieces. "
        "aiayn translate --shortlist K then decodes over those pieces only.",
    )
    s.add_argument("model", help="the model directory (the table is written into it)")
    s.add_argument("--source", required=True, help="the training corpus's source side")
    s.add_argument("--target", required=True, help="its target side, line by line")
    s.add_argument(
        "--best",
        type=integer(minimum=1),
        default=100,
        help="target pieces kept per source piece (the most --shortlist can use)",
    )
    s.add_argument(
        "--frequent",
        type=integer(minimum=1),
        default=100,
        help="most frequent target pieces always allowed",
    )
    s.add_argument(
        "--lines", type=integer(minimum=1), default=200_000, help="sentence pairs read at most"
    )
    s.add_argument(
        "--raw",
        action="store_true",
        help="the corpus is text as the subword model reads it (not prepared as natural "
        "text is: the model's tokenizer.json)",
    )
    s.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    from aiayn.translate.shortlist_table import build_shortlist

    log(
        f"building the lexical table of {args.model} from the first {args.lines:,} pairs of "
        f"{args.source} / {args.target} (about a minute for 200,000 pairs)..."
    )
    path = build_shortlist(
        args.model,
        args.source,
        args.target,
        best=args.best,
        frequent=args.frequent,
        lines=args.lines,
        raw=args.raw,
    )
    print(f"wrote {path}")
    return 0
