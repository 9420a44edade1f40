"""WMT14 English–German (the paper's §5.1 data): download or copy the official archives,
then write plain text files aiayn prepares like any other corpus.

Written into DEST: ``train.{en,de}`` (Europarl v7 + Common Crawl + News Commentary v9, about
4.5M pairs), ``newstest2013.{en,de}`` (validation), ``newstest2014.{en,de}`` (the paper's test
set, from its SGML files). The archives are kept in ``DEST/archives``; each output file is
written under a temporary name and renamed, so an interrupted run resumes where it stopped.
"""

from __future__ import annotations

import html
import os
import re
import shutil
import tarfile
from collections.abc import Callable, Iterator
from pathlib import Path

from aiayn.data.corpus import CorpusError, count_lines
from aiayn.data.download import download

ARCHIVES = {
    "training-parallel-europarl-v7.tgz": "http://www.statmt.org/wmt13/",
    "training-parallel-commoncrawl.tgz": "http://www.statmt.org/wmt13/",
    "training-parallel-nc-v9.tgz": "http://www.statmt.org/wmt14/",
    "dev.tgz": "http://www.statmt.org/wmt14/",
    "test-full.tgz": "http://www.statmt.org/wmt14/",
}
TRAIN_MEMBERS = [  # (archive, member prefix: + ".en" / ".de")
    ("training-parallel-europarl-v7.tgz", "training/europarl-v7.de-en"),
    ("training-parallel-commoncrawl.tgz", "commoncrawl.de-en"),
    ("training-parallel-nc-v9.tgz", "training/news-commentary-v9.de-en"),
]
VALID_MEMBER = ("dev.tgz", "dev/newstest2013")
TEST_MEMBERS = {  # language -> member of test-full.tgz
    "en": "test-full/newstest2014-deen-src.en.sgm",
    "de": "test-full/newstest2014-deen-ref.de.sgm",
}
LANGS = ("en", "de")
SEGMENT = re.compile(r"<seg[^>]*>(.*?)</seg>", re.IGNORECASE)


def fetch_wmt14(
    dest: str | Path,
    *,
    source: str | Path | None = None,
    log: Callable[[str], None] = lambda _: None,
) -> Path:
    """Put WMT14 En–De into ``dest``: archives copied from ``source`` (a directory holding
    the ``.tgz`` files), else downloaded from statmt.org; then extracted.

    Raises:
        CorpusError: an archive cannot be found, downloaded or read, or a member is missing.
    """
    dest = Path(dest)
    archives = dest / "archives"
    archives.mkdir(parents=True, exist_ok=True)
    for name, base in ARCHIVES.items():
        target = archives / name
        if target.is_file():
            continue
        if source is not None:
            _copy(Path(source) / name, target)
        else:
            log(f"downloading {base}{name}")
            _download(base + name, target)
    for lang in LANGS:
        _write(dest / f"train.{lang}", _train_lines(archives, lang), log)
        archive, member = VALID_MEMBER
        _write(
            dest / f"newstest2013.{lang}",
            _member_lines(archives / archive, f"{member}.{lang}"),
            log,
        )
        _write(dest / f"newstest2014.{lang}", _sgm_lines(archives / "test-full.tgz", lang), log)
    for split in ("train", "newstest2013", "newstest2014"):
        counts = {lang: count_lines(dest / f"{split}.{lang}") for lang in LANGS}
        if counts["en"] != counts["de"]:
            raise CorpusError(
                f"{dest / split}: {counts['en']} English, {counts['de']} German lines"
            )
    return dest


def _train_lines(archives: Path, lang: str) -> Iterator[bytes]:
    for archive, member in TRAIN_MEMBERS:
        yield from _member_lines(archives / archive, f"{member}.{lang}")


def _member_lines(archive: Path, member: str) -> Iterator[bytes]:
    """The lines of one file inside a .tgz, streamed."""
    try:
        with tarfile.open(archive, "r:gz") as tar:
            try:
                handle = tar.extractfile(member)
            except KeyError:
                handle = None
            if handle is None:
                raise CorpusError(f"{archive}: has no {member}")
            for line in handle:
                yield line.rstrip(b"\r\n") + b"\n"
    except (tarfile.TarError, OSError, EOFError) as e:
        raise CorpusError(f"{archive}: unreadable ({e})") from None


def _sgm_lines(archive: Path, lang: str) -> Iterator[bytes]:
    """The segments of a WMT SGML test file, one a line, entities decoded."""
    for raw in _member_lines(archive, TEST_MEMBERS[lang]):
        match = SEGMENT.search(raw.decode("utf-8", errors="strict"))
        if match:
            yield (html.unescape(match.group(1)).strip() + "\n").encode("utf-8")


def _write(path: Path, lines: Iterator[bytes], log: Callable[[str], None]) -> None:
    if path.is_file():
        return
    log(f"writing {path}")
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    try:
        with open(tmp, "wb") as f:
            for line in lines:
                f.write(line)
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)


def _copy(src: Path, target: Path) -> None:
    if not src.is_file():
        raise CorpusError(f"{src}: not found in the local WMT14 directory")
    tmp = target.with_name(target.name + ".part")
    shutil.copyfile(src, tmp)
    os.replace(tmp, target)


def _download(url: str, target: Path) -> None:
    download(url, target, instead="pass --corpus DIR with the .tgz files instead")
