"""``aiayn calibrate``: give a model's confidence a meaning, the expected sentence chrF,
fitted on a validation set and kept in the model directory (``calibration.json``)."""

from __future__ import annotations

import argparse

from aiayn.cli.common import add_search_options, search_options, search_precision


def add_parsers(sub) -> None:
    c = sub.add_parser(
        "calibrate",
        help="fit the model's confidence to the sentence chrF of a validation set",
        description=(
            "Translate a validation set, fit a monotone curve from each translation's "
            "confidence to its sentence chrF and write it to MODEL/calibration.json: from "
            "then on every confidence (and --min-confidence) is an expected chrF, 0 to 1."
        ),
    )
    c.add_argument("model", help="the model directory")
    c.add_argument("--src", required=True, help="validation sources, one a line (.gz too)")
    c.add_argument("--ref", required=True, help="their references, one a line (.gz too)")
    add_search_options(c, "calibrate")
    c.add_argument(
        "--dry-run", action="store_true", help="print the fit without writing calibration.json"
    )
    c.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    import torch

    from aiayn.data import read_lines
    from aiayn.eval.calibration_fit import calibrate
    from aiayn.files import check_writable
    from aiayn.translate.calibration import CALIBRATION_FILE, write_calibration
    from aiayn.translate.translator import Translator

    device = torch.device(args.device)
    options = search_options(args, precision=search_precision(args.precision, device))
    if not args.dry_run:
        check_writable(args.model, what=CALIBRATION_FILE)
    translator = Translator.from_dir(args.model, device=args.device)
    translator.calibration = None  # fitted to the model's own confidence
    sources, references = list(read_lines(args.src)), list(read_lines(args.ref))
    fit = calibrate(
        translator.translate,
        sources,
        references,
        options,
        fitted_on=f"{args.src} / {args.ref}, beam {options.beam}",
    )
    c = fit.calibration
    print(
        f"{c.lines} lines: Spearman(confidence, sentence chrF) {fit.spearman:.3f}; "
        f"mean |confidence - chrF| {fit.gap_raw:.3f} raw, {fit.gap_calibrated:.3f} calibrated "
        f"(slope {c.slope:.3f}, intercept {c.intercept:.3f})"
    )
    if not args.dry_run:
        print(f"written: {write_calibration(args.model, c)}")
    return 0
