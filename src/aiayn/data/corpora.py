"""Training corpora for any language pair, through mtdata's index (OPUS with its Tatoeba,
ParaCrawl, CCMatrix and NLLB corpora, WMT's news commentary and Europarl, WikiMatrix, ...)
and the Tatoeba Challenge's training sets: list what there is for a pair, each corpus with
its licence where known, and fetch chosen ones, with mtdata's client, into the layout a
recipe's ``train`` and ``valid`` prefixes read.

Layout written, a directory that appears whole or not at all (``aiayn.files``)::

    DEST/train.SRC.gz  DEST/train.TGT.gz    every fetched pair but those held out
    DEST/valid.SRC.gz  DEST/valid.TGT.gz    ``valid`` pairs drawn at random (none if 0)
    DEST/sources.tsv                        id, licence, pairs and address of each corpus

One sentence a line, line i of each language's file aligned, whitespace runs as one space;
a validation sentence appears in no training pair, on either side. Downloads go to mtdata's
cache (``$MTDATA``, by default ``~/.mtdata``) and are read from there the next time.
"""

from __future__ import annotations

import gzip
import io
import random
import re
import tarfile
import zipfile
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TextIO

import mtdata
import requests
from mtdata import MTDataException
from mtdata.cache import Cache
from mtdata.entry import DatasetId, Entry
from mtdata.index import Index
from mtdata.iso.bcp47 import BCP47Tag, bcp47
from mtdata.parser import Parser

from aiayn.data.corpus import CorpusError
from aiayn.files import check_destination, holds_only, write_directory, write_failure

SOURCES = "sources.tsv"
WRITTEN = ("train.*.gz", "valid.*.gz", SOURCES)
UNKNOWN = "unknown"

# Licences where the publisher states one; mtdata's index records none on its entries.
# Everything else is listed as UNKNOWN: read the corpus's own page (for OPUS,
# https://opus.nlpl.eu/NAME) before using it.
GROUP_LICENCES: dict[str, str] = {  # every corpus of an mtdata group
    "Flores": "CC BY-SA 4.0",  # mtdata.index.flores's _LICENSE
    "AllenAi": "ODC-By 1.0",  # mtdata.index.allenai_nllb's _LICENSE
}
LICENCES: dict[tuple[str, str], str] = {  # (mtdata group, corpus name)
    ("OPUS", "tatoeba"): "CC BY 2.0 FR",  # https://tatoeba.org/en/terms_of_use
    ("Microsoft", "ntrex"): "CC BY-SA 4.0",  # https://github.com/MicrosoftTranslator/NTREX
}


# The Tatoeba Challenge's training sets (Tiedemann, 2020): all of OPUS for a pair, cleaned and
# de-duplicated against its test sets, one archive a pair (ISO 639-3 codes in alphabetical
# order); mtdata's index does not hold them. Layout as the release's README lists it.
CHALLENGE = "v2023-09-26"
CHALLENGE_SERVER = "https://object.pouta.csc.fi"  # its archives: /Tatoeba-Challenge-VERSION/
CHALLENGE_LICENCE = "CC BY-NC-SA 4.0"  # the release's README.md


# Development and test sets in mtdata's index, by name: trained on, they score nothing
EVALUATION = re.compile(
    r"newstest|generaltest|flores|ntrex|wmt24pp|wmt_news|(^|_)(dev|devtest|test)(_|$)"
)


@dataclass(frozen=True)
class Listing:
    """One corpus mtdata's index holds for a pair."""

    id: str  # mtdata's dataset id, e.g. OPUS-tatoeba-v20230412-eng-kor
    licence: str  # UNKNOWN where neither mtdata nor LICENCES says
    url: str
    evaluation: bool  # a development or test set (EVALUATION), not a training corpus


def load_index() -> Index:
    """mtdata's index of every corpus it knows (built once into its cache, about a minute)."""
    return Index.get_instance()


def list_corpora(
    index: Index, src: str, tgt: str, *, server: str = CHALLENGE_SERVER
) -> list[Listing]:
    """The corpora ``index`` holds for ``src``–``tgt`` (either direction), and the Tatoeba
    Challenge's (from ``server``), by id.

    Raises:
        CorpusError: the index holds none for the pair.
    """
    found = list(_entries(index, src, tgt))
    if not found:  # then the Tatoeba Challenge, built from OPUS, has none either
        raise CorpusError(
            f"mtdata's index holds no parallel corpus for {src}-{tgt} "
            f"({bcp47(src)}-{bcp47(tgt)}); check the language codes"
        )
    found = sorted([challenge_entry(src, tgt, server=server), *found], key=lambda e: str(e.did))
    return [
        Listing(str(e.did), licence(e), _address(e), bool(EVALUATION.search(e.did.name)))
        for e in found
    ]


def licence(entry: Entry) -> str:
    """The licence of ``entry`` where its publisher states one, else ``UNKNOWN``."""
    did = entry.did
    if (did.group, did.name) == ("Tatoeba", "challenge"):
        return CHALLENGE_LICENCE
    return GROUP_LICENCES.get(did.group) or LICENCES.get((did.group, did.name), UNKNOWN)


def _entries(index: Index, src: str, tgt: str) -> Iterator[Entry]:
    pair = (bcp47(src), bcp47(tgt))
    for entry in index.get_entries():
        if len(entry.did.langs) == 2 and entry.is_compatible(pair):
            yield entry


def challenge_entry(src: str, tgt: str, *, server: str = CHALLENGE_SERVER) -> Entry:
    """The Tatoeba Challenge's training set of ``src``–``tgt``, as an mtdata entry (an
    archive of ``train.src.gz`` and ``train.trg.gz``, the first code's side as ``src``),
    downloaded from ``server`` (upstream's, or a copy with its paths)."""
    first, second = sorted((bcp47(src).lang, bcp47(tgt).lang))
    folder = f"data/release/{CHALLENGE}/{first}-{second}"
    return Entry(
        did=DatasetId("Tatoeba", "challenge", CHALLENGE.replace("-", ""), (first, second)),
        url=f"{server.rstrip('/')}/Tatoeba-Challenge-{CHALLENGE}/{first}-{second}.tar",
        filename=f"tatoeba-challenge-{CHALLENGE}-{first}-{second}.tar",
        ext="tar",
        in_paths=[f"{folder}/train.src.gz", f"{folder}/train.trg.gz"],
        in_ext="txt",
    )


def _address(entry: Entry) -> str:
    return entry.url if isinstance(entry.url, str) else " ".join(entry.url)


def find(
    index: Index, ids: Iterable[str], src: str, tgt: str, *, server: str = CHALLENGE_SERVER
) -> list[Entry]:
    """The entries named by ``ids`` (of ``index``, or the Tatoeba Challenge's from
    ``server``), each checked to pair ``src`` with ``tgt``.

    Raises:
        CorpusError: an id is malformed, not in the index, or of another pair.
    """
    pair = (bcp47(src), bcp47(tgt))
    entries = []
    for text in ids:
        try:
            did = DatasetId.parse(text)
        except Exception:
            raise CorpusError(
                f"{text!r}: not a dataset id (GROUP-NAME-VERSION-LANG-LANG, as listed by "
                f"`aiayn data corpora --pair {src}-{tgt}`)"
            ) from None
        challenge = challenge_entry(src, tgt, server=server)
        if did == challenge.did:
            entries.append(challenge)
            continue
        if did not in index:
            raise CorpusError(
                f"{text!r}: no such dataset in mtdata's index "
                f"(`aiayn data corpora --pair {src}-{tgt}` lists those of the pair)"
            )
        entry = index[did]
        if len(did.langs) != 2 or not entry.is_compatible(pair):
            raise CorpusError(f"{text!r}: not a parallel corpus of {src}-{tgt}")
        entries.append(entry)
    return entries


Located = list[tuple[Entry, object]]  # each entry with the paths of its download


@dataclass(frozen=True)
class Fetched:
    """What ``fetch_corpora`` wrote: pairs per corpus, and the split sizes."""

    pairs: dict[str, int]  # dataset id -> usable pairs it gave
    train: int
    valid: int


def fetch_corpora(
    entries: list[Entry],
    dest: str | Path,
    *,
    src: str,
    tgt: str,
    cache_dir: str | Path,
    valid: int = 0,
    seed: int = 1,
    overwrite: bool = False,
    log: Callable[[str], None] = lambda _: None,
) -> Fetched:
    """Download ``entries`` (into mtdata's cache at ``cache_dir``) and write them, as
    ``src``/``tgt`` pairs, to the directory ``dest`` (see the module's layout).

    Every download ends before anything is written; ``dest`` appears only once whole.

    Raises:
        CorpusError: a corpus cannot be downloaded or read, gives no pair, or ``dest`` holds
            something else (or a corpus, without ``overwrite``); the disk refused a write.
    """
    if not entries:
        raise CorpusError("name at least one dataset id to fetch")
    replaceable = holds_only(WRITTEN, required=SOURCES)
    check_destination(Path(dest), replace=overwrite, replaceable=replaceable, what="corpus")
    cache = Cache(Path(cache_dir))
    pair = (bcp47(src), bcp47(tgt))
    located = [(e, _download(cache, e, log)) for e in entries]
    held_out = _draw_valid(located, pair, valid, seed)
    with write_directory(
        dest, replace=overwrite, replaceable=replaceable, what="corpus", error=CorpusError
    ) as tmp:
        counts, train = _write_train(located, pair, held_out, tmp, src, tgt)
        if held_out:
            _write_lines(tmp / f"valid.{src}.gz", (s for s, _ in held_out))
            _write_lines(tmp / f"valid.{tgt}.gz", (t for _, t in held_out))
        _write_sources(tmp / SOURCES, located, counts)
    return Fetched(pairs=counts, train=train, valid=len(held_out))


def _download(cache: Cache, entry: Entry, log: Callable[[str], None]) -> object:
    """Fetch ``entry`` into the cache (or find it there): the paths mtdata's parser reads."""
    log(f"{entry.did}: {_address(entry)}")
    try:
        paths = cache.get_entry(entry)
    except Exception as e:
        raise _failure(entry, e) from None
    if entry.is_archive and isinstance(paths, Path):  # mtdata found no archive in it
        raise CorpusError(
            f"{entry.did}: its download {paths} is not the {entry.ext} archive expected "
            "(damaged? remove it from mtdata's cache and fetch again)"
        )
    return paths


def _failure(entry: Entry, error: Exception) -> CorpusError:
    """``error`` from mtdata's download as one line naming the dataset and its address."""
    if isinstance(error, requests.ConnectionError | requests.Timeout):
        reason = "no connection: check the network"
    elif isinstance(error, AssertionError) and str(error).isdigit():
        reason = f"the server answered HTTP {error}"  # mtdata asserts the status is 200
    elif not isinstance(error, requests.RequestException) and write_failure(error):
        reason = f"mtdata's cache cannot hold it: {write_failure(error)}"
    elif isinstance(error, MTDataException):
        reason = str(error)
    else:
        reason = f"{type(error).__name__}: {error}"
    return CorpusError(f"{entry.did}: cannot fetch {_address(entry)} ({' '.join(reason.split())})")


def _pairs(
    entry: Entry, paths: object, pair: tuple[BCP47Tag, BCP47Tag]
) -> Iterator[tuple[str, str]]:
    """The non-empty pairs of a downloaded corpus, in ``pair``'s order, whitespace collapsed.

    Raises:
        CorpusError: mtdata cannot read the download (a damaged file, a format it fails on).
    """
    _, swap = BCP47Tag.check_compat_swap(pair, entry.did.langs)
    parser = Parser(paths, ext=entry.in_ext or None, ent=entry)
    try:
        for record in parser.read_segs(show_pbar=False):
            if len(record) < 2 or not record[0] or not record[1]:
                continue
            a, b = " ".join(str(record[0]).split()), " ".join(str(record[1]).split())
            if a and b:
                yield (b, a) if swap else (a, b)
    except (
        OSError,
        EOFError,
        ValueError,  # UnicodeDecodeError among them
        AssertionError,
        zipfile.BadZipFile,
        tarfile.TarError,
        MTDataException,
    ) as e:
        raise CorpusError(f"{entry.did}: mtdata cannot read its download ({e})") from None


def _draw_valid(
    located: Located, pair: tuple[BCP47Tag, BCP47Tag], size: int, seed: int
) -> list[tuple[str, str]]:
    """``size`` distinct pairs drawn uniformly from all of ``located``'s (reservoir
    sampling: one pass, memory for ``size`` pairs), in the order they came."""
    if size <= 0:
        return []
    rng = random.Random(seed)
    reservoir: list[tuple[int, tuple[str, str]]] = []
    seen = 0
    for entry, paths in located:
        for item in _pairs(entry, paths, pair):
            seen += 1
            if len(reservoir) < size:
                reservoir.append((seen, item))
            elif (j := rng.randrange(seen)) < size:
                reservoir[j] = (seen, item)
    chosen = dict.fromkeys(item for _, item in sorted(reservoir))
    if seen <= size:
        raise CorpusError(
            f"the corpora hold {seen:,} pairs: too few to hold out {size:,} for validation "
            "and train on the rest (a smaller --valid)"
        )
    return list(chosen)


def _write_train(
    located: Located,
    pair: tuple[BCP47Tag, BCP47Tag],
    held_out: list[tuple[str, str]],
    directory: Path,
    src: str,
    tgt: str,
) -> tuple[dict[str, int], int]:
    """Write every pair of ``located`` that shares no sentence with ``held_out``.

    Returns:
        The usable pairs of each corpus, and the pairs written.
    """
    held_src, held_tgt = {s for s, _ in held_out}, {t for _, t in held_out}
    counts: dict[str, int] = {}
    written = 0
    with (
        _gzip_text(directory / f"train.{src}.gz") as fs,
        _gzip_text(directory / f"train.{tgt}.gz") as ft,
    ):
        for entry, paths in located:
            count = 0
            for s, t in _pairs(entry, paths, pair):
                count += 1
                if s in held_src or t in held_tgt:
                    continue
                fs.write(s + "\n")
                ft.write(t + "\n")
                written += 1
            if count == 0:
                raise CorpusError(f"{entry.did}: its download holds no sentence pair")
            counts[str(entry.did)] = count
    if written == 0:
        raise CorpusError("no training pair is left once the validation pairs are held out")
    return counts, written


def _gzip_text(path: Path) -> TextIO:
    """A gzip file for UTF-8 text with ``\\n`` line ends, no time stamp (the same text gives
    the same bytes)."""
    raw = gzip.GzipFile(path, "wb", mtime=0)
    return io.TextIOWrapper(raw, encoding="utf-8", newline="\n")


def _write_lines(path: Path, lines: Iterable[str]) -> None:
    with _gzip_text(path) as f:
        for line in lines:
            f.write(line + "\n")


def _write_sources(path: Path, located: Located, counts: dict[str, int]) -> None:
    """One row a corpus: its id, licence, usable pairs and address (tab-separated)."""
    rows = ["id\tlicence\tpairs\turl"]
    for entry, _ in located:
        rows.append(f"{entry.did}\t{licence(entry)}\t{counts[str(entry.did)]}\t{_address(entry)}")
    path.write_text("\n".join(rows) + "\n", encoding="utf-8")


def cache_dir() -> Path:
    """mtdata's download cache: ``$MTDATA``, by default ``~/.mtdata``."""
    return Path(mtdata.cache_dir)
