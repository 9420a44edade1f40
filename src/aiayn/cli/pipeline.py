"""``aiayn pipeline``: corpus → prepare → train → average → translate → score, from one recipe."""

from __future__ import annotations

import argparse
from pathlib import Path

from aiayn.cli.common import TerminalReporter, log


def add_parsers(sub) -> None:
    p = sub.add_parser(
        "pipeline",
        help="corpus -> prepare -> train -> average -> translate -> score, from one recipe",
    )
    p.add_argument("recipe", help="TOML recipe, e.g. configs/multi30k_en_de_tiny.toml")
    p.add_argument("--work", help="work directory (default: runs/<recipe name>)")
    p.add_argument(
        "--corpus",
        metavar="DIR",
        help="a local copy of the recipe's named corpus (Multi30k files, WMT14 .tgz archives); "
        "default: $AIAYN_DATA_DIR/NAME (../shared/data/NAME) if present, else download",
    )
    p.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="override a recipe field, e.g. --set run.max_minutes=30",
    )
    p.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    from aiayn.memory import tune_allocator

    allocator = tune_allocator()
    from aiayn.config_io import apply_overrides, load_toml, recipe_from_dict
    from aiayn.pipeline import default_corpus_dir, format_results, run_pipeline

    work = args.work or str(Path("runs") / Path(args.recipe).stem)
    recipe = recipe_from_dict(apply_overrides(load_toml(args.recipe), args.set), where=args.recipe)
    corpus = args.corpus or default_corpus_dir(recipe.pipeline.dataset)
    log(f"aiayn pipeline {args.recipe} -> {work} (corpus: {corpus or 'download'}; {allocator})")
    result = run_pipeline(
        recipe,
        work,
        corpus_from=corpus,
        recipe_dir=Path(args.recipe).parent,
        reporter=TerminalReporter(),
    )
    print(format_results(result, recipe))
    return 0
