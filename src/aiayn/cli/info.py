"""``aiayn info``: a model's size, component by component."""

from __future__ import annotations

import argparse

from aiayn.cli.common import integer
from aiayn.config import MODEL_PRESETS


def add_parsers(sub) -> None:
    info = sub.add_parser("info", help="print a model's size, component by component")
    info.add_argument("--preset", choices=sorted(MODEL_PRESETS), default="base")
    info.add_argument(
        "--vocab-size",
        type=integer(minimum=8),
        default=37000,
        help="shared vocabulary size (default: 37000, the paper's WMT En-De BPE)",
    )
    info.add_argument("--model", help="a model directory instead of a preset")
    info.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    from aiayn.config import model_preset
    from aiayn.eval.size import parameter_table
    from aiayn.models import build_model
    from aiayn.store import load_model

    if args.model:
        model, cfg = load_model(args.model)
        title = args.model
    else:
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
