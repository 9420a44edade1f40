"""Open evaluation sets as named data: FLORES-200 devtest, NTREX-128 and the Tatoeba Challenge
test sets, English paired with other languages, downloaded (or read from a mirror or a local
copy), checked and written as plain aligned files.

Layout written (one sentence a line, line i of each language's file aligned, gzipped):
``DEST/flores200/devtest.{lang}.gz``, ``DEST/ntrex/newstest2019.{lang}.gz`` (English sources,
references in each language) and ``DEST/tatoeba/test.{a}-{b}.{lang}.gz`` (one test set per
pair), with two-letter language codes. A file is a prefix away from a recipe's ``test``
entry: ``DEST/flores200/devtest`` with ``src_lang = "en"``, ``tgt_lang = "ko"``.

Sources (pinned commits, so the sentence counts below never move):

- FLORES-200 devtest (NLLB Team et al., 2022; CC BY-SA 4.0) and Tatoeba test v2021-08-07
  (Tiedemann, 2020; CC BY 2.0 FR), from Helsinki-NLP/OPUS-MT-testsets.
- NTREX-128 (Federmann et al., 2022; CC BY-SA 4.0), from MicrosoftTranslator/NTREX: WMT19's
  English news test set translated into 128 languages.
"""

from __future__ import annotations

import gzip
import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from aiayn.data.corpus import CorpusError, count_lines
from aiayn.data.download import download

DOWNLOAD_S = 120.0  # a test set file's download, in all
MAX_DOWNLOAD_BYTES = 64 * 2**20  # a test set file is a few megabytes

OPUS_MT_TESTSETS = (
    "https://raw.githubusercontent.com/Helsinki-NLP/OPUS-MT-testsets/"
    "ac0f19c0be3cb4e0d9450fcb2d7a9847c4bdd180"
)
NTREX = "https://raw.githubusercontent.com/MicrosoftTranslator/NTREX/c9f006f2c132c932b83ccd7aaa6a35930dd9c370"
TATOEBA_VERSION = "v2021-08-07"


@dataclass(frozen=True)
class Language:
    """A language's codes in each set."""

    iso3: str  # ISO 639-3, as the Tatoeba test sets name it
    flores: str  # FLORES-200's code (language and script)
    ntrex: str  # NTREX-128's file suffix
    tatoeba: int  # sentences of its Tatoeba test set with English


LANGUAGES: dict[str, Language] = {
    "en": Language("eng", "eng_Latn", "eng", 0),
    "ko": Language("kor", "kor_Hang", "kor", 2400),
    "pt": Language("por", "por_Latn", "por", 13222),
    "de": Language("deu", "deu_Latn", "deu", 17565),
    "fr": Language("fra", "fra_Latn", "fra", 12681),
    "es": Language("spa", "spa_Latn", "spa", 16583),
    "it": Language("ita", "ita_Latn", "ita", 17320),
    "ru": Language("rus", "rus_Cyrl", "rus", 19425),
    "ja": Language("jpn", "jpn_Jpan", "jpn", 13862),
    "zh": Language("zho", "zho_Hans", "zho-CN", 10390),
}
FLORES_SENTENCES = 1012
NTREX_SENTENCES = 1997


@dataclass(frozen=True)
class Remote:
    """One file to fetch: where it is, relative to its repository, and where it goes."""

    base: str  # OPUS_MT_TESTSETS or NTREX (or a mirror's own root)
    path: str
    target: str  # relative to DEST
    sentences: int


def remotes(name: str, langs: list[str]) -> list[Remote]:
    """The files of test set ``name`` for English and each of ``langs``.

    Raises:
        CorpusError: an unknown set or language.
    """
    unknown = [lang for lang in langs if lang not in LANGUAGES or lang == "en"]
    if unknown:
        raise CorpusError(
            f"unknown language {unknown[0]!r} for the test sets; choose from "
            f"{', '.join(k for k in LANGUAGES if k != 'en')} (English is always included)"
        )
    if name not in REMOTES:
        raise CorpusError(f"unknown test set {name!r}; choose from {', '.join(REMOTES)}")
    return REMOTES[name](langs)


def _flores(langs: list[str]) -> list[Remote]:
    base = "datasets/facebook/flores/flores200_dataset/devtest"
    return [
        Remote(
            OPUS_MT_TESTSETS,
            f"{base}/{LANGUAGES[lang].flores}.devtest",
            f"flores200/devtest.{lang}.gz",
            FLORES_SENTENCES,
        )
        for lang in ["en", *langs]
    ]


def _ntrex(langs: list[str]) -> list[Remote]:
    names = {"en": "newstest2019-src.eng.txt"}
    names |= {lang: f"newstest2019-ref.{LANGUAGES[lang].ntrex}.txt" for lang in langs}
    return [
        Remote(NTREX, f"NTREX-128/{file}", f"ntrex/newstest2019.{lang}.gz", NTREX_SENTENCES)
        for lang, file in names.items()
    ]


def _tatoeba(langs: list[str]) -> list[Remote]:
    """One test set per pair, named as upstream: the two ISO 639-3 codes in order."""
    files = []
    for lang in langs:
        iso3, sentences = LANGUAGES[lang].iso3, LANGUAGES[lang].tatoeba
        first, second = sorted([("eng", "en"), (iso3, lang)])
        folder = f"datasets/helsinki_nlp/tatoeba/testsets/{first[0]}-{second[0]}"
        prefix = f"tatoeba/test.{first[1]}-{second[1]}"
        for code, short in (first, second):
            path = f"{folder}/tatoeba-test-{TATOEBA_VERSION}.{code}"
            files.append(Remote(OPUS_MT_TESTSETS, path, f"{prefix}.{short}.gz", sentences))
    return files


REMOTES: dict[str, Callable[[list[str]], list[Remote]]] = {
    "flores200": _flores,
    "ntrex": _ntrex,
    "tatoeba": _tatoeba,
}


def fetch_testset(
    name: str,
    dest: str | Path,
    *,
    langs: list[str],
    source: str | Path | None = None,
    mirror: str | None = None,
    log: Callable[[str], None] = lambda _: None,
) -> list[Path]:
    """Put test set ``name`` for English and ``langs`` into ``dest``, each file checked.

    Files come from ``source``, a local copy in the layout this writes (for example
    ``../shared/data/seedpairs``), else from ``mirror``, a URL (``file://`` too) standing for
    both upstream repositories with their paths, else from upstream. Files already present
    are kept (and checked).

    Returns:
        The files, English first.

    Raises:
        CorpusError: a file cannot be found or downloaded, or has the wrong sentence count.
    """
    dest = Path(dest)
    written = []
    for remote in remotes(name, langs):
        target = dest / remote.target
        target.parent.mkdir(parents=True, exist_ok=True)
        if not target.is_file():
            if source is not None:
                _copy(Path(source) / remote.target, target, remote.sentences)
            else:
                url = (
                    f"{mirror.rstrip('/')}/{remote.path}"
                    if mirror
                    else f"{remote.base}/{remote.path}"
                )
                log(f"downloading {url}")
                _download(url, target, remote.sentences)
        _check_count(target, target, remote.sentences)
        written.append(target)
    return written


def _copy(src: Path, target: Path, sentences: int) -> None:
    if not src.is_file():
        raise CorpusError(f"{src}: not found in the local copy")
    _store(src.read_bytes(), target, str(src), sentences)


def _download(url: str, target: Path, sentences: int) -> None:
    raw = target.with_name(target.name + ".download")
    try:
        download(url, raw, total_s=DOWNLOAD_S, max_bytes=MAX_DOWNLOAD_BYTES)
        _store(raw.read_bytes(), target, url, sentences)
    finally:
        raw.unlink(missing_ok=True)


def _store(data: bytes, target: Path, where: str, sentences: int) -> None:
    """Write ``data`` (plain or gzipped) to ``target`` as UTF-8 text with plain line ends
    (NTREX's files end lines with CR LF), gzipped; only when it has ``sentences`` lines."""
    if data[:2] == b"\x1f\x8b":
        data = gzip.decompress(data)
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as e:
        raise CorpusError(f"{where}: not UTF-8 text ({e.reason} at byte {e.start})") from None
    text = text.replace("\r\n", "\n")
    tmp = target.with_name(target.name + ".part")
    try:
        tmp.write_bytes(gzip.compress(text.encode("utf-8"), mtime=0))
        _check_count(tmp, where, sentences)
        os.replace(tmp, target)
    finally:
        tmp.unlink(missing_ok=True)  # a short write or a wrong count leaves nothing


def _check_count(path: Path, where: str | Path, sentences: int) -> None:
    found = count_lines(path)
    if found != sentences:
        raise CorpusError(f"{where}: {found} sentences, expected {sentences}")
