"""``aiayn train`` (a model from a TOML config) and ``aiayn average`` (checkpoints, §6.1)."""

from __future__ import annotations

import argparse
from pathlib import Path

from aiayn.cli.common import TerminalReporter, UsageError, integer, log


def add_parsers(sub) -> None:
    train = sub.add_parser("train", help="train a model from a TOML config")
    train.add_argument("config", help="TOML file: [model], [data], [optim], [run] tables")
    train.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="override a config field, e.g. --set optim.lr=0.001 (repeatable)",
    )
    train.add_argument(
        "--resume",
        action="store_true",
        help="continue from the run directory's newest intact checkpoint",
    )
    train.set_defaults(handler=run_train)
    average = sub.add_parser("average", help="average checkpoints into one model (§6.1)")
    average.add_argument("paths", nargs="+", help="a run directory, or checkpoint directories")
    average.add_argument(
        "--last",
        type=integer(minimum=1),
        default=5,
        help="with a run directory: how many of its last checkpoints",
    )
    average.add_argument("--out", required=True, help="model directory to write")
    average.add_argument(
        "--overwrite",
        action="store_true",
        help="replace a model directory aiayn wrote at --out (nothing else is ever replaced)",
    )
    average.set_defaults(handler=run_average)


def run_train(args: argparse.Namespace) -> int:
    from aiayn.memory import release_free_memory, tune_allocator

    allocator = tune_allocator()
    from aiayn.config import training_warnings
    from aiayn.config_io import load_train_config
    from aiayn.train import Trainer
    from aiayn.validation import card_for, validators_for

    cfg = load_train_config(args.config, args.set)
    for warning in training_warnings(cfg):
        log(warning)
    reporter = TerminalReporter()
    trainer = Trainer(
        cfg,
        resume=args.resume,
        reporter=reporter,
        validators=validators_for(cfg),
        release_memory=release_free_memory,  # the allocator tuned above keeps what is freed
        card=card_for(cfg, args.command_line),
    )
    trainer.log(f"allocator: {allocator}")
    try:
        state = trainer.train()
    except RuntimeError as e:  # a rank that stopped answering: one line, not gloo's trace
        from aiayn.runtime import distributed_failure

        failure = distributed_failure(e, timeout_minutes=cfg.run.dist_timeout_minutes)
        if failure is None:
            raise
        raise failure from None
    if state.best_valid is None:
        best = "no validation"
    else:
        best = f"best validation {state.best_metric} {state.best_valid:.3f}"
    log(
        f"done: {state.update} updates, {state.tokens:,} target tokens, "
        f"{state.train_seconds:.0f}s training; {best}"
    )
    return 0


def run_average(args: argparse.Namespace) -> int:
    from aiayn.files import check_destination
    from aiayn.store.model_dir import is_model_directory, save_model
    from aiayn.train.checkpoint import (
        CHECKPOINTS,
        average_checkpoints,
        averaged_card,
        list_checkpoints,
        model_assets,
    )
    from aiayn.train.run_dir import RUN_FILES, is_run_directory

    out = Path(args.out)
    if out.resolve().parent.name == CHECKPOINTS:
        raise UsageError(f"--out {out}: inside a run's checkpoints; choose a path outside it")
    if out.name in RUN_FILES and is_run_directory(out.resolve().parent):
        raise UsageError(
            f"--out {out}: the run's own {out.name!r}, which training writes; "
            "choose another path (e.g. RUN/average)"
        )
    check_destination(
        out, replace=args.overwrite, replaceable=is_model_directory, what="model directory"
    )
    paths = [Path(p) for p in args.paths]
    if any(out.resolve() == p.resolve() for p in paths):
        raise UsageError(f"--out {out}: one of the models being averaged; choose another path")
    if len(paths) == 1 and list_checkpoints(paths[0]):
        available = list_checkpoints(paths[0])
        if len(available) < args.last:
            log(f"{paths[0]} has {len(available)} checkpoints, fewer than --last {args.last}")
        paths = available[-args.last :]
    for path in paths:
        if not path.is_dir():
            raise UsageError(f"{path}: not a checkpoint or model directory")
    model, cfg = average_checkpoints(paths)
    card = averaged_card(paths, args.command_line)
    save_model(model, cfg, out, assets=model_assets(paths[-1]), replace=args.overwrite, card=card)
    print(f"averaged {len(paths)} checkpoints ({paths[0].name} .. {paths[-1].name}) -> {out}")
    return 0
