"""``aiayn import marian`` (an opus-mt model from Hugging Face) and ``aiayn export ct2``."""

from __future__ import annotations

import argparse

from aiayn.cli.common import log


def add_parsers(sub) -> None:
    imp = sub.add_parser("import", help="turn another tool's model into an aiayn model directory")
    kinds = imp.add_subparsers(dest="kind", required=True, metavar="KIND")
    marian = kinds.add_parser(
        "marian", help="a Hugging Face Marian (opus-mt) directory", description=MARIAN_HELP
    )
    marian.add_argument("hf_dir", help="directory with config.json, model.safetensors, *.spm")
    marian.add_argument("--out", required=True, help="aiayn model directory to write")
    marian.add_argument("--overwrite", action="store_true", help="replace a model at --out")
    marian.set_defaults(handler=run_import_marian)
    exp = sub.add_parser("export", help="write an aiayn model for another tool")
    targets = exp.add_subparsers(dest="target", required=True, metavar="TARGET")
    ct2 = targets.add_parser("ct2", help="a CTranslate2 model directory")
    ct2.add_argument("model", help="aiayn translation model directory")
    ct2.add_argument("--out", required=True, help="CTranslate2 model directory to write")
    ct2.add_argument(
        "--quantization",
        choices=["float32", "int8", "int8_float32", "int16", "float16", "bfloat16"],
        help="weights' type in the exported model (default: float32)",
    )
    ct2.add_argument("--overwrite", action="store_true", help="replace a model at --out")
    ct2.set_defaults(handler=run_export_ct2)


MARIAN_HELP = (
    "Get one with network access, e.g. `hf download Helsinki-NLP/opus-mt-en-de "
    "--local-dir opus-mt-en-de`, then `aiayn import marian opus-mt-en-de --out en-de`."
)


def run_import_marian(args: argparse.Namespace) -> int:
    from aiayn.interop.marian import import_marian

    out = import_marian(args.hf_dir, args.out, overwrite=args.overwrite)
    log(f"imported {args.hf_dir} -> {out}")
    return 0


def run_export_ct2(args: argparse.Namespace) -> int:
    from aiayn.interop.ct2 import export_ct2

    out = export_ct2(args.model, args.out, quantization=args.quantization, overwrite=args.overwrite)
    log(f"exported {args.model} -> {out} (CTranslate2)")
    return 0
