"""Where a recipe's text is: a named corpus (Multi30k, WMT14) fetched or copied into the work
directory, or the user's own files; and where local copies of named corpora are looked for."""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from itertools import islice
from pathlib import Path

from aiayn.config import PipelineConfig
from aiayn.data.binarize import resolve_split_file, split_name
from aiayn.data.corpus import CorpusError, read_lines
from aiayn.data.multi30k import fetch_multi30k, raw_path, tok_path
from aiayn.data.wmt14 import fetch_wmt14

DATA_DIR = Path("../shared/data")  # relative to the current directory: beside a checkout
DOMAINS = {  # what a named corpus's text is, for a model card
    "multi30k": "Multi30k, one-sentence descriptions of Flickr photographs (image captions: "
    "people, animals and everyday scenes) and their translations",
    "wmt14": "WMT14, news commentary, European Parliament proceedings and web-crawled text",
}
CORPUS_MARKERS = {"multi30k": "train.en.gz", "wmt14": "test-full.tgz"}  # present in a copy


@dataclass(frozen=True)
class CorpusFiles:
    """Where a recipe's text is: file prefixes (``PREFIX.LANG``, plain or .gz) by split."""

    train: str
    valid: str
    tests: dict[str, str]  # test split name -> prefix
    pretokenized: bool  # tokenised text: BLEU on its tokens (tokenize "none")


def data_dir(explicit: str | Path | None = None) -> Path:
    """Where local copies of named corpora are: ``explicit``, else ``$AIAYN_DATA_DIR``, else
    ``../shared/data`` relative to the current directory."""
    if explicit is not None:
        return Path(explicit)
    base = os.environ.get("AIAYN_DATA_DIR")
    return Path(base) if base else DATA_DIR


def default_corpus_dir(dataset: str, data: str | Path | None = None) -> Path | None:
    """``data_dir(data)/<dataset>`` if it holds a copy of that named corpus; None means
    download (and nothing for your own files)."""
    root = data_dir(data) / dataset
    marker = CORPUS_MARKERS.get(dataset)
    return root if marker and (root / marker).is_file() else None


def corpus_files(
    p: PipelineConfig,
    work: Path,
    *,
    corpus_from: str | Path | None,
    recipe_dir: Path,
    log: Callable[[str], None],
) -> CorpusFiles:
    """The recipe's corpus: Multi30k or WMT14 fetched into ``work`` (or copied from
    ``corpus_from``), or the user's own files."""
    if p.dataset == "files":

        def resolve(prefix: str) -> str:
            return str(recipe_dir / prefix) if not Path(prefix).is_absolute() else prefix

        tests = {split_name(t): resolve(t) for t in p.test}
        return CorpusFiles(resolve(p.train), resolve(p.valid), tests, p.pretokenized)
    if p.dataset == "wmt14":
        root = fetch_wmt14(work / "wmt14", source=corpus_from, log=log)
        tests = {"newstest2014": str(root / "newstest2014")}
        return CorpusFiles(str(root / "train"), str(root / "newstest2013"), tests, False)
    root = fetch_multi30k(work / "multi30k", source=corpus_from, log=log)
    path_of = tok_path if p.text == "tok" else raw_path

    def prefix(split: str) -> str:  # .../train.lc.norm.tok.en.gz -> .../train.lc.norm.tok
        return str(path_of(root, split, p.src_lang))[: -len(f".{p.src_lang}.gz")]

    tests = {split: prefix(split) for split in p.test_splits}
    return CorpusFiles(prefix("train"), prefix("val"), tests, p.text == "tok")


def read_split(prefix: str, p: PipelineConfig) -> tuple[list[str], list[str]]:
    """Source and reference lines of a split (the first ``p.test_limit`` when set).

    Raises:
        CorpusError: when the two sides have different numbers of lines.
    """
    limit = p.test_limit or None
    sources = list(islice(read_lines(resolve_split_file(prefix, p.src_lang)), limit))
    references = list(islice(read_lines(resolve_split_file(prefix, p.tgt_lang)), limit))
    if len(sources) != len(references):
        raise CorpusError(
            f"{prefix}: {len(sources)} {p.src_lang} lines but {len(references)} {p.tgt_lang}"
        )
    if not any(references):
        raise CorpusError(f"{prefix}: the split has no {p.tgt_lang} text to score against")
    return sources, references
