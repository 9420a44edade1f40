"""Multi30K task 1 (Elliott et al., 2016) as a named dataset: download or copy, then check.

Layout written (the same as the public repository's ``data/task1``, all gzipped):
``DEST/{split}.{lang}.gz`` raw cased text, and ``DEST/tok/{split}.lc.norm.tok.{lang}.gz``,
lowercased and Moses-tokenised, the text the research literature scores BLEU on.
"""

from __future__ import annotations

import gzip
import os
import shutil
from collections.abc import Callable
from pathlib import Path

from aiayn.data.corpus import CorpusError, count_lines
from aiayn.data.download import download

MAX_DOWNLOAD_BYTES = 64 * 2**20  # a Multi30k file is at most a few megabytes

BASE_URL = "https://raw.githubusercontent.com/multi30k/dataset/master/data/task1"
SPLITS = {"train": 29000, "val": 1014, "test_2016_flickr": 1000, "test_2017_flickr": 1000}
LANGS = ("en", "de", "fr")


def raw_path(root: Path, split: str, lang: str) -> Path:
    return root / f"{split}.{lang}.gz"


def tok_path(root: Path, split: str, lang: str) -> Path:
    return root / "tok" / f"{split}.lc.norm.tok.{lang}.gz"


def fetch_multi30k(
    dest: str | Path,
    *,
    source: str | Path | None = None,
    log: Callable[[str], None] = lambda _: None,
) -> Path:
    """Put Multi30K into ``dest``: copied from ``source`` if given, else downloaded.

    Files already present are kept. Every file's sentence count is checked.

    Raises:
        CorpusError: a file cannot be found, downloaded, or has the wrong sentence count.
    """
    dest = Path(dest)
    (dest / "tok").mkdir(parents=True, exist_ok=True)
    for split in SPLITS:
        for lang in LANGS:
            for path_of, remote in (
                (raw_path, f"raw/{split}.{lang}.gz"),
                (tok_path, f"tok/{split}.lc.norm.tok.{lang}"),
            ):
                target = path_of(dest, split, lang)
                if target.is_file():
                    continue
                if source is not None:
                    _copy(path_of(Path(source), split, lang), target)
                else:
                    log(f"downloading {remote}")
                    _download(f"{BASE_URL}/{remote}", target)
    check_multi30k(dest)
    return dest


def check_multi30k(root: str | Path) -> None:
    """Raise CorpusError unless every split has its published sentence count."""
    root = Path(root)
    for split, expected in SPLITS.items():
        for lang in LANGS:
            for path in (raw_path(root, split, lang), tok_path(root, split, lang)):
                if not path.is_file():
                    raise CorpusError(f"{path}: missing")
                found = count_lines(path)
                if found != expected:
                    raise CorpusError(f"{path}: {found} sentences, expected {expected}")


def _copy(src: Path, target: Path) -> None:
    if not src.is_file():
        raise CorpusError(f"{src}: not found in the local Multi30k directory")
    tmp = target.with_name(target.name + ".part")
    shutil.copyfile(src, tmp)
    os.replace(tmp, target)


def _download(url: str, target: Path) -> None:
    """Fetch ``url`` into ``target``, gzipping it unless it already is."""
    raw = target.with_name(target.name + ".download")
    tmp = target.with_name(target.name + ".part")
    try:
        download(url, raw, max_bytes=MAX_DOWNLOAD_BYTES)
        data = raw.read_bytes()
        if data[:2] != b"\x1f\x8b":
            data = gzip.compress(data)
        tmp.write_bytes(data)
        os.replace(tmp, target)
    finally:
        raw.unlink(missing_ok=True)
        tmp.unlink(missing_ok=True)
