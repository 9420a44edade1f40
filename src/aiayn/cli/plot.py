"""``aiayn plot``: attention heatmaps, the positional encodings, a run's training curves."""

from __future__ import annotations

import argparse
from pathlib import Path

from aiayn.cli.common import UsageError, add_search_options, integer, log, search_options


def add_parsers(sub) -> None:
    plot = sub.add_parser("plot", help="draw attention, positional encodings or training curves")
    kinds = plot.add_subparsers(dest="plot", required=True, metavar="WHAT")
    att = kinds.add_parser("attention", help="attention heatmaps for one sentence")
    att.add_argument("--model", required=True, help="model directory")
    att.add_argument("--src", required=True, help="source sentence")
    att.add_argument("--tgt", help="target sentence to force-decode (default: translate --src)")
    att.add_argument(
        "--kind",
        choices=["encoder", "decoder", "cross", "all"],
        default="all",
        help="which attention (all: one file each, suffixed _encoder ...)",
    )
    att.add_argument("--layers", help="comma-separated 1-based layers (default: all)")
    att.add_argument("--heads", help="comma-separated 1-based heads (default: all)")
    add_search_options(att, "plot")  # the search that translates --src
    att.add_argument("-o", "--output", required=True, help="FILE.png or FILE.svg")
    att.set_defaults(handler=run_attention)
    pos = kinds.add_parser("positional", help="the sinusoidal positional encoding (§3.5)")
    pos.add_argument("--d-model", type=integer(minimum=2, maximum=8192), default=128)
    pos.add_argument("--length", type=integer(minimum=2, maximum=10_000), default=100)
    pos.add_argument("--concat", action="store_true", help="the [sin | cos] layout")
    pos.add_argument("-o", "--output", required=True)
    pos.set_defaults(handler=run_positional)
    cur = kinds.add_parser("curves", help="loss, learning rate and BLEU of a training run")
    cur.add_argument("run_dir")
    cur.add_argument("-o", "--output", required=True)
    cur.set_defaults(handler=run_curves)


def _indices(option: str, text: str | None) -> list[int] | None:
    if not text:
        return None
    try:
        values = [int(x) for x in text.split(",")]
    except ValueError:
        raise UsageError(f"{option}: expected comma-separated numbers, got {text!r}") from None
    if min(values) < 1:
        raise UsageError(f"{option}: layers and heads are numbered from 1, got {text!r}")
    return [v - 1 for v in values]


def _check_output(output: str) -> Path:
    from aiayn.viz.figure import check_figure_path

    return check_figure_path(output)


def run_attention(args: argparse.Namespace) -> int:
    from aiayn.translate.translator import Translator
    from aiayn.viz import attention_figure, save_figure, translation_attention

    output = _check_output(args.output)
    layers, heads = _indices("--layers", args.layers), _indices("--heads", args.heads)
    translator = Translator.from_dir(args.model)
    src_ids = translator.src_tokenizer.encode([args.src.strip()])[0]
    if not src_ids:
        raise UsageError("--src is empty")
    if args.tgt is not None:
        tgt_ids = translator.tgt_tokenizer.encode([args.tgt.strip()])[0]
    else:
        options = search_options(args)  # the others: the library's defaults
        translator.check(options)
        [[best]] = translator.translate_ids([src_ids], options)
        tgt_ids = best.tokens
        log(f"translation: {best.text}")
    data = translation_attention(translator, src_ids, tgt_ids)
    kinds = ["encoder", "decoder", "cross"] if args.kind == "all" else [args.kind]
    figures = [(kind, attention_figure(data, kind, layers=layers, heads=heads)) for kind in kinds]
    for kind, figure in figures:
        path = (
            output.with_name(f"{output.stem}_{kind}{output.suffix}") if len(kinds) > 1 else output
        )
        print(save_figure(figure, path))
    return 0


def run_positional(args: argparse.Namespace) -> int:
    from aiayn.viz import positional_figure, save_figure

    output = _check_output(args.output)
    if args.d_model % 2:
        raise UsageError(f"--d-model must be even, got {args.d_model}")
    figure = positional_figure(
        d_model=args.d_model, length=args.length, interleaved=not args.concat
    )
    print(save_figure(figure, output))
    return 0


def run_curves(args: argparse.Namespace) -> int:
    from aiayn.viz import curves_figure, save_figure

    output = _check_output(args.output)
    print(save_figure(curves_figure(args.run_dir), output))
    return 0
