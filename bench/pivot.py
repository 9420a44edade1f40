"""A pair through English against its direct model: Fr→De by Fr→En then En→De (what
``aiayn serve`` and ``aiayn translate`` do for a pair with no model of its own), scored on
Multi30k's test sets beside the direct Fr→De model.

    aiayn pipeline configs/multi30k_fr_de_tiny_raw.toml   # the direct model
    aiayn pipeline configs/multi30k_fr_en_tiny_raw.toml   # the first half
    aiayn pipeline configs/multi30k_en_de_tiny_raw.toml   # the second half (scripts/run.sh)
    python bench/pivot.py --direct runs/multi30k_fr_de_tiny_raw/model \\
        --to-en runs/multi30k_fr_en_tiny_raw/model --from-en runs/multi30k_en_de_tiny_raw/model

or, in minutes each, the quick recipes (``multi30k_{fr_de,fr_en,en_de}_quick.toml``, 400
updates, test2016 only: ``--sets 2016``) in their ``runs/multi30k_*_quick`` directories.

Prints, for each test set, BLEU and chrF (sacreBLEU, standard signature) of both and the
seconds each took (the pivot decodes twice). Corpora under ``AIAYN_DATA_DIR`` (default
``../shared/data``): ``multi30k/test_YEAR_flickr.{fr,de}.gz``.
"""

from __future__ import annotations

import argparse
import gzip
import os
import time
from pathlib import Path

from aiayn import SearchOptions, Translator, corpus_scores
from aiayn.translate.routing import RoutedTranslator


def _lines(path: Path, limit: int | None) -> list[str]:
    with gzip.open(path, "rt", encoding="utf-8") as f:
        lines = [line.strip() for line in f]
    return lines[:limit] if limit else lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--direct", required=True, help="the Fr→De model directory")
    parser.add_argument("--to-en", required=True, help="the Fr→En model directory")
    parser.add_argument("--from-en", required=True, help="the En→De model directory")
    parser.add_argument("--sets", nargs="+", default=["2016", "2017"])
    parser.add_argument("--beam", type=int, default=5)
    parser.add_argument("--limit", type=int, help="the first N lines of each set only")
    args = parser.parse_args()
    data = Path(os.environ.get("AIAYN_DATA_DIR", "../shared/data")) / "multi30k"
    direct = Translator.from_dir(args.direct)
    pivot = RoutedTranslator(
        [Translator.from_dir(args.to_en), Translator.from_dir(args.from_en)], "fr", "de"
    )
    options = SearchOptions(beam=args.beam)
    for year in args.sets:
        sources = _lines(data / f"test_{year}_flickr.fr.gz", args.limit)
        references = _lines(data / f"test_{year}_flickr.de.gz", args.limit)
        for name, translator in (("direct Fr→De", direct), ("Fr→En→De", pivot)):
            start = time.perf_counter()
            found = translator.translate(sources, options, warn=lambda _: None)
            seconds = time.perf_counter() - start
            scores = corpus_scores([h[0].text for h in found], references, tgt_lang="de")
            print(f"test{year} {name}: {scores} ({seconds:.1f}s, {len(sources)} lines)")


if __name__ == "__main__":
    main()
