"""The ``aiayn`` command line: the only module that reads argv, prints, or configures logging."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence

from aiayn.config import MODEL_PRESETS


class UserError(Exception):
    """A mistake the user can fix: printed as one line, exit status 2."""


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    handler: Callable[[argparse.Namespace], int] = args.handler
    try:
        return handler(args)
    except UserError as e:
        print(f"aiayn {args.command}: error: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"aiayn {args.command}: interrupted", file=sys.stderr)
        return 130


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="aiayn", description="The Transformer of 'Attention Is All You Need'."
    )
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    info = sub.add_parser("info", help="print a model's size, component by component")
    info.add_argument("--preset", choices=sorted(MODEL_PRESETS), default="base")
    info.add_argument(
        "--vocab-size",
        type=int,
        default=37000,
        help="shared vocabulary size (default: 37000, the paper's WMT En-De BPE)",
    )
    info.add_argument("--model", help="a model directory instead of a preset")
    info.set_defaults(handler=cmd_info)
    return parser


def cmd_info(args: argparse.Namespace) -> int:
    from aiayn.config import model_preset
    from aiayn.models import ModelLoadError, build_model, load_model
    from aiayn.models.summary import parameter_table

    if args.model:
        try:
            model, cfg = load_model(args.model)
        except ModelLoadError as e:
            raise UserError(str(e)) from None
        title = args.model
    else:
        if args.vocab_size <= 0:
            raise UserError("--vocab-size must be positive")
        cfg = model_preset(args.preset).with_vocab(args.vocab_size)
        model = build_model(cfg)
        title = f"preset {args.preset}, vocabulary {args.vocab_size:,}"
    print(f"aiayn model: {title}")
    print(
        f"  d_model={cfg.d_model} h={cfg.n_heads} d_ff={cfg.d_ff} "
        f"N={cfg.n_encoder_layers}+{cfg.n_decoder_layers} "
        f"{'pre' if cfg.norm_first else 'post'}-norm positional={cfg.positional}"
    )
    for name, count in parameter_table(model):
        print(f"  {name:<28} {count:>14,}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
