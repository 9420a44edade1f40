"""Reading corpora: one sentence a line, UTF-8, plain or gzip. Errors name the file and line."""

from __future__ import annotations

import gzip
import io
import json
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from itertools import zip_longest
from pathlib import Path

from aiayn.errors import AiaynError
from aiayn.files import sha256_file


class CorpusError(AiaynError, ValueError):
    """Input text that cannot be used; the message names the file (and line) at fault."""


def open_binary(path: str | Path) -> io.BufferedIOBase:
    """Open a plain or gzip file (recognised by its magic bytes) for reading bytes; a pipe
    (``<(zcat corpus.gz)``, ``/dev/stdin``) is read once, as it comes.

    Raises:
        CorpusError: no such file, a directory, or a file that cannot be opened.
    """
    path = Path(path)
    if path.is_dir():
        raise CorpusError(f"{path}: a directory, not a text file")
    if not path.exists():
        raise CorpusError(f"{path}: no such file")
    try:
        f = open(path, "rb")  # noqa: SIM115
    except OSError as e:
        raise CorpusError(f"{path}: cannot be opened ({e.strerror or e})") from None
    if f.peek(2)[:2] != b"\x1f\x8b":
        return f
    unzipped = gzip.GzipFile(fileobj=f, mode="rb")
    unzipped.myfileobj = f  # closed with it, as gzip.open does for the files it opens
    return unzipped


def open_text(path: str | Path) -> io.TextIOBase:
    """Open a plain or gzip file for strict UTF-8 reading (a leading BOM is dropped)."""
    return io.TextIOWrapper(open_binary(path), encoding="utf-8-sig", errors="strict")


def read_lines(path: str | Path) -> Iterator[str]:
    """Yield the lines of ``path`` without their line ends and surrounding whitespace.

    Raises:
        CorpusError: the file is missing or unreadable, or a line is not valid UTF-8
            (file and line named).
    """
    path = Path(path)
    with open_binary(path) as f:
        yield from decode_lines(f, str(path))


def decode_lines(raw_lines: Iterable[bytes], name: str) -> Iterator[str]:
    """UTF-8 lines of a byte stream (a file, standard input), stripped; ``name`` is what
    errors call the stream.

    Raises:
        CorpusError: a line is not valid UTF-8, or the stream breaks off (a truncated .gz).
    """
    try:
        for line_no, raw in enumerate(raw_lines, start=1):
            try:
                text = raw.decode("utf-8")
            except UnicodeDecodeError as e:
                raise CorpusError(
                    f"{name}: line {line_no}: invalid UTF-8 ({e.reason} at byte {e.start})"
                ) from None
            if line_no == 1:
                text = text.removeprefix("\ufeff")  # a UTF-8 byte-order mark is no text
            yield text.strip()
    except (OSError, EOFError) as e:
        raise CorpusError(f"{name}: unreadable ({e})") from None


def count_lines(path: str | Path) -> int:
    return sum(1 for _ in read_lines(path))


@dataclass
class PairStats:
    """What reading a parallel corpus kept and dropped."""

    pairs: int = 0
    empty_dropped: int = 0


def read_parallel(
    src_path: str | Path,
    tgt_path: str | Path,
    *,
    stats: PairStats | None = None,
    empty: str = "drop",
) -> Iterator[tuple[str, str]]:
    """Yield aligned (source, target) lines of two files.

    Args:
        src_path: source-language file.
        tgt_path: target-language file, line i the translation of source line i.
        stats: filled in with counts as the pairs are read.
        empty: what to do with a pair where either side is empty: "drop" (count it),
            "keep", or "error".

    Raises:
        CorpusError: the files have different line counts (both files and counts named),
            invalid UTF-8, or an empty line when ``empty="error"``.
    """
    if empty not in ("drop", "keep", "error"):
        raise ValueError(f"empty must be drop, keep or error, got {empty!r}")
    stats = stats if stats is not None else PairStats()
    pairs = zip_longest(read_lines(src_path), read_lines(tgt_path))
    for line_no, (src, tgt) in enumerate(pairs, start=1):
        if src is None or tgt is None:
            raise CorpusError(
                f"line counts differ: {src_path} has {count_lines(src_path)} lines, "
                f"{tgt_path} has {count_lines(tgt_path)}"
            )
        if (not src or not tgt) and empty != "keep":
            if empty == "error":
                side = src_path if not src else tgt_path
                raise CorpusError(f"{side}: line {line_no}: empty line")
            stats.empty_dropped += 1
            continue
        stats.pairs += 1
        yield src, tgt


MANIFEST = "manifest.json"


def read_manifest(directory: Path, *, expected_format: str, description: str) -> dict:
    """The JSON manifest of a prepared dataset directory, checked for its format, and every
    file it lists for its size (a quick check; ``verify_checksums`` reads them all).

    Raises:
        CorpusError: no manifest, not one of this format, or a file missing or truncated.
    """
    path = directory / MANIFEST
    if not path.is_file():
        raise CorpusError(f"{directory}: not a prepared {description} (no {MANIFEST})")
    try:
        manifest = json.loads(path.read_text())
    except (ValueError, UnicodeDecodeError) as e:
        raise CorpusError(f"{path}: not valid JSON ({e})") from None
    if not isinstance(manifest, dict) or manifest.get("format") != expected_format:
        raise CorpusError(f"{path}: not an aiayn {description} manifest")
    for name, size in manifest.get("sizes", {}).items():
        file = directory / name
        if not file.is_file():
            raise CorpusError(f"{file}: missing (listed in {MANIFEST})")
        if file.stat().st_size != size:
            raise CorpusError(
                f"{file}: {file.stat().st_size} bytes, {MANIFEST} says {size}: the dataset is "
                "damaged (prepare it again)"
            )
    return manifest


def file_records(directory: Path) -> dict[str, dict[str, object]]:
    """The manifest entries of the files in ``directory``: their sizes and SHA-256 sums."""
    files = sorted(p for p in directory.iterdir() if p.is_file() and p.name != MANIFEST)
    return {
        "sizes": {p.name: p.stat().st_size for p in files},
        "sha256": {p.name: sha256_file(p) for p in files},
    }


def verify_checksums(directory: Path, manifest: dict) -> None:
    """Read every file of a dataset and check it against the manifest's SHA-256 sums.

    Raises:
        CorpusError: naming the first file that differs.
    """
    for name, expected in manifest.get("sha256", {}).items():
        if sha256_file(directory / name) != expected:
            raise CorpusError(
                f"{directory / name}: its checksum differs from {MANIFEST}: the dataset is "
                "damaged (prepare it again)"
            )


def is_dataset(expected_format: str):
    """A predicate: is a directory a dataset aiayn wrote, of ``expected_format``?"""

    def check(directory: Path) -> bool:
        try:
            return json.loads((directory / MANIFEST).read_text()).get("format") == expected_format
        except (OSError, ValueError, AttributeError):
            return False

    return check
