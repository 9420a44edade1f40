"""Sentence splitters on the shared languages: accuracy and speed.

Consecutive test sentences are joined into paragraphs of ``--k`` sentences (one space
between them); a splitter is right on a paragraph when it gives back exactly those
sentences. Boundary recall and precision count the joins it found and the splits it made
that were not joins. Speed: paragraphs split per second (the best of ``--repeats``).

    python bench/sentences.py [--k 4] [--paragraphs 250] [--repeats 3]

Reads ``$AIAYN_DATA_DIR`` (default ``../shared/data``): Multi30k's test2016 (en, de, fr),
FLORES-200 devtest (ko, pt), Tatoeba's test (ko, pt).
"""

from __future__ import annotations

import argparse
import gzip
import os
import time
from collections.abc import Callable
from pathlib import Path

DATA = Path(os.environ.get("AIAYN_DATA_DIR", "../shared/data"))
SETS = {
    "multi30k en": ("multi30k/test_2016_flickr.en.gz", "en"),
    "multi30k de": ("multi30k/test_2016_flickr.de.gz", "de"),
    "multi30k fr": ("multi30k/test_2016_flickr.fr.gz", "fr"),
    "flores ko": ("seedpairs/flores200/devtest.ko.gz", "ko"),
    "flores pt": ("seedpairs/flores200/devtest.pt.gz", "pt"),
    "tatoeba ko": ("seedpairs/tatoeba/test.en-ko.ko.gz", "ko"),
    "tatoeba pt": ("seedpairs/tatoeba/test.en-pt.pt.gz", "pt"),
}
Splitter = Callable[[str], list[str]]


def splitters(lang: str) -> dict[str, Splitter]:
    """Each candidate for ``lang`` (English rules where a library has none for it)."""
    import blingfire
    import pysbd
    from pysbd.languages import LANGUAGE_CODES
    from sentence_splitter import SentenceSplitter, SentenceSplitterException

    seg = pysbd.Segmenter(language=lang if lang in LANGUAGE_CODES else "en", clean=False)
    try:
        moses = SentenceSplitter(language=lang)
    except SentenceSplitterException:
        moses = SentenceSplitter(language="en")
    return {
        "pysbd": lambda text: [s.strip() for s in seg.segment(text) if s.strip()],
        "sentence-splitter": moses.split,
        "blingfire": lambda text: blingfire.text_to_sentences(text).split("\n"),
    }


def paragraphs(path: Path, k: int, count: int) -> list[list[str]]:
    with gzip.open(path, "rt", encoding="utf-8") as f:
        lines = [line.strip() for line in f if line.strip()]
    return [lines[i : i + k] for i in range(0, min(len(lines), k * count) - k + 1, k)]


def measure(split: Splitter, groups: list[list[str]], repeats: int) -> tuple[float, ...]:
    exact = found = made = 0
    for group in groups:
        out = [s.strip() for s in split(" ".join(group)) if s.strip()]
        exact += out == group
        truth, got = _boundaries(group), _boundaries(out)
        found += len(truth & got)
        made += len(got)
    joins = sum(len(g) - 1 for g in groups)
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        for group in groups:
            split(" ".join(group))
        best = min(best, time.perf_counter() - start)
    return exact / len(groups), found / joins, found / max(made, 1), len(groups) / best


def _boundaries(sentences: list[str]) -> set[int]:
    """Character offsets (spaces removed) where each sentence after the first starts."""
    ends, position = set(), 0
    for s in sentences[:-1]:
        position += len(s.replace(" ", ""))
        ends.add(position)
    return ends


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--k", type=int, default=4, help="sentences per paragraph")
    parser.add_argument("--paragraphs", type=int, default=250, help="paragraphs per set")
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    print("| set | splitter | paragraphs exact | boundary recall | precision | paragraphs/s |")
    print("|---|---|---:|---:|---:|---:|")
    for name, (file, lang) in SETS.items():
        groups = paragraphs(DATA / file, args.k, args.paragraphs)
        for label, split in splitters(lang).items():
            exact, recall, precision, speed = measure(split, groups, args.repeats)
            print(
                f"| {name} | {label} | {exact:.1%} | {recall:.1%} | {precision:.1%} | "
                f"{speed:,.0f} |"
            )


if __name__ == "__main__":
    main()
