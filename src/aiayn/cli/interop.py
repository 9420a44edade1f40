"""``aiayn import marian`` (an opus-mt model from Hugging Face) and ``aiayn export`` (CTranslate2,
Hugging Face Marian, Argos Translate)."""

from __future__ import annotations

import argparse

from aiayn.cli.common import log


def add_parsers(sub) -> None:
    imp = sub.add_parser("import", help="turn another tool's model into an aiayn model directory")
    kinds = imp.add_subparsers(dest="kind", required=True, metavar="KIND")
    marian = kinds.add_parser(
        "marian", help="a Hugging Face Marian (opus-mt) directory", description=MARIAN_HELP
    )
    marian.add_argument(
        "hf_dir",
        help="directory with config.json, model.safetensors, *.spm; or a Hugging Face Hub id "
        "such as Helsinki-NLP/opus-mt-en-de, downloaded into the Hub's cache",
    )
    marian.add_argument("--out", required=True, help="aiayn model directory to write")
    marian.add_argument("--overwrite", action="store_true", help="replace a model at --out")
    marian.set_defaults(handler=run_import_marian)
    exp = sub.add_parser("export", help="write an aiayn model for another tool")
    targets = exp.add_subparsers(dest="target", required=True, metavar="TARGET")
    ct2 = _target(targets, "ct2", "a CTranslate2 model directory", "CTranslate2 model directory")
    _quantization(ct2, "weights' type in the exported model")
    ct2.set_defaults(handler=run_export_ct2)
    hf = _target(
        targets,
        "hf",
        "a Hugging Face Marian directory (transformers)",
        "Hugging Face model directory",
        description=HF_HELP,
    )
    hf.set_defaults(handler=run_export_hf)
    argos = _target(
        targets,
        "argos",
        "an Argos Translate package (LibreTranslate)",
        "package file (NAME.argosmodel)",
        description=ARGOS_HELP,
    )
    argos.add_argument(
        "--from", dest="from_code", help="source language code (default: the model's)"
    )
    argos.add_argument("--to", dest="to_code", help="target language code (default: the model's)")
    argos.add_argument(
        "--splitter", help="a trained MiniSBD .onnx sentence splitter to ship (default: rule-based)"
    )
    _quantization(argos, "weights' type in the package's CTranslate2 model")
    argos.add_argument("--version", default="1.0", help="the package's version (default: 1.0)")
    argos.set_defaults(handler=run_export_argos)


def _target(
    targets, name: str, help: str, written: str, description: str | None = None
) -> argparse.ArgumentParser:
    """An ``aiayn export`` target's parser, with the options every target has."""
    parser = targets.add_parser(name, help=help, description=description)
    parser.add_argument("model", help="aiayn translation model directory")
    parser.add_argument("--out", required=True, help=f"{written} to write")
    parser.add_argument("--overwrite", action="store_true", help="replace an export at --out")
    return parser


def _quantization(parser: argparse.ArgumentParser, what: str) -> None:
    parser.add_argument(
        "--quantization",
        choices=["float32", "int8", "int8_float32", "int16", "float16", "bfloat16"],
        help=f"{what} (default: float32)",
    )


MARIAN_HELP = (
    "With network access, `aiayn import marian Helsinki-NLP/opus-mt-en-de --out en-de` "
    "downloads the model's files from the Hugging Face Hub and imports them; a directory "
    "downloaded before (`hf download Helsinki-NLP/opus-mt-en-de --local-dir opus-mt-en-de`) "
    "imports as `aiayn import marian opus-mt-en-de --out en-de`."
)


HF_HELP = (
    "Load it with transformers: AutoModelForSeq2SeqLM.from_pretrained(DIR) and "
    "AutoTokenizer.from_pretrained(DIR)."
)
ARGOS_HELP = (
    "Install it with argostranslate.package.install_from_path(FILE), or into LibreTranslate's "
    "package directory; it translates offline."
)


def run_import_marian(args: argparse.Namespace) -> int:
    from aiayn.interop.hub import fetch_marian, is_hub_id
    from aiayn.interop.marian import import_marian

    source = args.hf_dir
    if is_hub_id(source):
        log(f"fetching {source} from the Hugging Face Hub (or its cache)")
        source = fetch_marian(source)
    out = import_marian(source, args.out, overwrite=args.overwrite, command=args.command_line)
    log(f"imported {args.hf_dir} -> {out}")
    return 0


def run_export_ct2(args: argparse.Namespace) -> int:
    from aiayn.interop.ct2 import export_ct2

    out = export_ct2(args.model, args.out, quantization=args.quantization, overwrite=args.overwrite)
    log(f"exported {args.model} -> {out} (CTranslate2)")
    return 0


def run_export_hf(args: argparse.Namespace) -> int:
    from aiayn.interop.hf import export_hf

    out = export_hf(args.model, args.out, overwrite=args.overwrite)
    log(f"exported {args.model} -> {out} (Hugging Face Marian)")
    return 0


def run_export_argos(args: argparse.Namespace) -> int:
    from aiayn.interop.argos import export_argos

    out = export_argos(
        args.model,
        args.out,
        from_code=args.from_code,
        to_code=args.to_code,
        splitter=args.splitter,
        quantization=args.quantization,
        version=args.version,
        overwrite=args.overwrite,
    )
    log(f"exported {args.model} -> {out} (Argos Translate package)")
    return 0
