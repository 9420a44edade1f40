"""``aiayn pipeline``: corpus → prepare → train → average → translate → score, from one recipe."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING

from aiayn.cli.common import TerminalReporter, log

if TYPE_CHECKING:
    from aiayn.config import Recipe
    from aiayn.pipeline import PipelineResult


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
        "default: $AIAYN_DATA_DIR/NAME (else ../shared/data/NAME, relative to the current "
        "directory) if present, else download",
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
    from aiayn.memory import release_free_memory, tune_allocator

    allocator = tune_allocator()
    from aiayn.config_io import apply_overrides, load_toml, recipe_from_dict
    from aiayn.pipeline import default_corpus_dir, run_pipeline

    work = args.work or str(Path("runs") / Path(args.recipe).stem)
    values = apply_overrides(load_toml(args.recipe), args.set)
    recipe = recipe_from_dict(values, where=args.recipe, recipe_dir=str(Path(args.recipe).parent))
    from aiayn.config import training_warnings

    corpus = args.corpus or default_corpus_dir(recipe.pipeline.dataset)
    where = "your files" if recipe.pipeline.dataset == "files" else corpus or "download"
    log(f"aiayn pipeline {args.recipe} -> {work} (corpus: {where}; {allocator})")
    for warning in training_warnings(recipe.train):
        log(warning)
    result = run_pipeline(
        recipe,
        work,
        corpus_from=corpus,
        recipe_dir=Path(args.recipe).parent,
        reporter=TerminalReporter(),
        release_memory=release_free_memory,  # the allocator tuned above keeps what is freed
        command=args.command_line,
    )
    print(format_results(result, recipe))
    return 0


def _speed(tokens_per_second: float | None) -> str:
    return (
        "speed not recorded" if tokens_per_second is None else f"{tokens_per_second:,.0f} tokens/s"
    )


def format_results(result: PipelineResult, recipe: Recipe) -> str:
    """The results table and example translations, as Markdown."""
    p = recipe.pipeline
    pair = f"{p.src_lang}→{p.tgt_lang}"
    lines = [
        f"## {p.dataset} {pair}, beam {p.decode.beam}, α {result.alpha}"
        + (" (chosen on the validation set)" if result.alpha_scores else ""),
        "",
    ]
    literature = any(t.literature_bleu is not None for t in result.tests)
    if literature:
        lines += [
            "| test set | BLEU | BLEU (tokenised, lowercased) | chrF | sentences/s |",
            "|---|---:|---:|---:|---:|",
        ]
    else:
        lines += ["| test set | BLEU | chrF | sentences/s |", "|---|---:|---:|---:|"]
    for t in result.tests:
        tok = f"{t.literature_bleu:.2f} | " if literature and t.literature_bleu is not None else ""
        lines.append(
            f"| {t.split} | {t.bleu:.2f} | {tok}{t.chrf:.2f} | "
            f"{t.sentences / max(t.seconds, 1e-9):.1f} |"
        )
    lines += [
        f"\n{t.split}: {t.outputs.warning}" for t in result.tests if t.outputs and t.outputs.warning
    ]
    lines += [
        "",
        f"- training: {result.updates:,} updates, {result.train_tokens:,} target tokens in "
        f"{result.train_seconds / 60:.1f} min ({_speed(result.tokens_per_second)})",
        f"- whole pipeline: {result.total_seconds / 60:.1f} min wall clock ("
        + ", ".join(f"{k} {v:.0f}s" for k, v in result.stage_seconds.items())
        + ")",
        f"- BLEU signature: {result.tests[0].bleu_signature}" if result.tests else "",
        f"- chrF signature: {result.tests[0].chrf_signature}" if result.tests else "",
        (
            f"- tokenised, lowercased BLEU (the literature's: hypotheses normalised, "
            f"Moses-tokenised and lowercased as Multi30k's tok/ files, against those): "
            f"{result.tests[0].literature_signature}"
        )
        if literature
        else "",
        _alpha_line(result),
        "",
        "Examples (test set 1):",
    ]
    for ex in result.tests[0].examples if result.tests else []:
        lines += [
            f"- src: {ex['source']}",
            f"  ref: {ex['reference']}",
            f"  hyp: {ex['translation']}",
        ]
    return "\n".join(lines)


def _alpha_line(result: PipelineResult) -> str:
    if not result.alpha_scores:
        return ""
    tried = ", ".join(f"α {a}: {bleu:.2f}" for a, bleu in result.alpha_scores.items())
    return f"- length penalty chosen on the validation set: {tried} -> α {result.alpha}"
