"""``aiayn distill``: a teacher model translates a corpus into a student's training data."""

from __future__ import annotations

import argparse

from aiayn.cli.common import add_search_options, integer, log, number, search_options
from aiayn.config import DistillConfig

DEFAULT = DistillConfig()


def add_parsers(sub) -> None:
    p = sub.add_parser(
        "distill",
        help="translate a corpus with a teacher model: a student's training data",
        description=DESCRIPTION,
    )
    p.add_argument("teacher", help="the teacher: an aiayn translation model directory")
    p.add_argument(
        "source",
        help="the corpus to translate: one sentence a line (plain or .gz), in the form the "
        "teacher was trained on",
    )
    p.add_argument(
        "--out", required=True, help="directory for the shards and OUT/train.SRC, OUT/train.TGT"
    )
    p.add_argument("--src-lang", default="", help="source language (default: the teacher's)")
    p.add_argument("--tgt-lang", default="", help="target language (default: the teacher's)")
    add_search_options(p, "distill", base=DEFAULT.decode)
    p.add_argument(
        "--workers",
        type=integer(1, 256),
        default=DEFAULT.workers,
        help=f"decoding processes, one thread each (default: {DEFAULT.workers})",
    )
    p.add_argument(
        "--shard-lines",
        type=integer(1),
        default=DEFAULT.shard_lines,
        help=f"source lines per shard, the unit of resuming (default: {DEFAULT.shard_lines})",
    )
    _filters(p)
    p.add_argument(
        "--restart",
        action="store_true",
        help="a directory made by another teacher, source or settings: translate again",
    )
    p.set_defaults(handler=run_distill)


def _filters(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--max-ratio",
        type=number(1.0),
        default=DEFAULT.max_ratio,
        help="drop pairs whose longer side has more than this many times the pieces of the "
        f"shorter (default: {DEFAULT.max_ratio})",
    )
    p.add_argument(
        "--min-score",
        type=number(maximum=0.0),
        default=DEFAULT.min_score,
        help="drop translations whose mean log-probability per piece is below this "
        f"(default: {DEFAULT.min_score})",
    )
    p.add_argument(
        "--no-dedupe",
        dest="dedupe",
        action="store_false",
        help="keep repeated (source, translation) pairs",
    )


DESCRIPTION = (
    "Sequence-level knowledge distillation (Kim & Rush, 2016): the teacher translates every "
    "line of SOURCE with beam search, in shards written whole as they finish (a rerun "
    "translates only the shards missing), in worker processes; the translations are filtered "
    "(empty, length ratio, score, duplicates) into OUT/train.SRC and OUT/train.TGT, a corpus "
    "to train a student on (`aiayn prepare --vocab-from TEACHER` encodes it with the "
    "teacher's tokenizer)."
)


def run_distill(args: argparse.Namespace) -> int:
    from aiayn.pipeline.distill_stage import check_teacher, distill

    cfg = DistillConfig(
        teacher=args.teacher,
        decode=search_options(args, DEFAULT.decode),
        workers=args.workers,
        shard_lines=args.shard_lines,
        max_ratio=args.max_ratio,
        min_score=args.min_score,
        dedupe=args.dedupe,
    )
    teacher = check_teacher(args.teacher, (args.src_lang, args.tgt_lang))
    done = distill(teacher, args.source, args.out, cfg, restart=args.restart, log=log)
    src, tgt = done.languages
    log(
        f"distilled {args.source} -> {done.prefix}.{src} / {done.prefix}.{tgt} "
        f"({done.translated} shards translated, {done.reused} reused, {done.seconds:.1f} s)"
    )
    return 0
