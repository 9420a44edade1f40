"""What every document format shares: its limits, its errors, the checks a zip package
passes before a library opens it, and ``RunDocument``: segments of runs whose text is
translated as one (``aiayn.text.runs``) and a ``save`` that writes the document back."""

from __future__ import annotations

import contextlib
import copy
import io
import zipfile
import zlib
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass

from aiayn.errors import AiaynError
from aiayn.text.runs import deal, has_word, segment_text

XML_SUFFIXES = (".xml", ".rels", ".xhtml", ".html", ".htm", ".opf", ".ncx", ".svg")


class DocumentError(AiaynError, ValueError):
    """A document that cannot be read (broken, hostile, or not of its format)."""


class DocumentTooLarge(DocumentError):
    """A document over one of its ``Limits`` (a server answers 413)."""


@dataclass(frozen=True, kw_only=True)
class Limits:
    """How large a document may be; each bound is checked before the work it bounds."""

    max_bytes: int = 20 << 20  # the file as given
    max_unpacked_bytes: int = 100 << 20  # a zip package's members, unpacked, together
    max_members: int = 5_000  # a zip package's members
    max_parts: int = 1_000  # slides, e-book chapters
    max_segments: int = 50_000  # paragraphs, table cells, cues: texts to translate
    max_runs: int = 200_000  # runs of formatting, across the document

    def check(self, what: str, count: int, limit: int, unit: str) -> None:
        """Raise ``DocumentTooLarge`` when ``count`` is over ``limit``."""
        if count > limit:
            raise DocumentTooLarge(f"{what}: {count:,} {unit}, more than the limit of {limit:,}")


DEFAULT_LIMITS = Limits()


@dataclass
class Run:
    """A run's text and how to put a new one in its place."""

    text: str
    put: Callable[[str], None]


class RunDocument:
    """A document as segments of runs (``texts``: what to translate) and its writer.

    ``render(translations)`` deals each translation to its segment's runs, calls ``put`` on
    every run whose text changed, and returns ``save()``; a document renders once.
    """

    def __init__(
        self,
        segments: Sequence[Sequence[Run]],
        save: Callable[[], bytes],
        *,
        what: str,
        limits: Limits,
    ):
        kept = [list(s) for s in segments if any(has_word(run.text) for run in s)]
        limits.check(what, len(kept), limits.max_segments, "texts to translate")
        limits.check(what, sum(len(s) for s in kept), limits.max_runs, "runs")
        self._segments = kept
        self._save = save
        self.texts = [segment_text([run.text for run in s]) for s in kept]

    def render(self, translations: Sequence[str]) -> bytes:
        """The document with segment ``i`` holding ``translations[i]``."""
        if len(translations) != len(self.texts):
            raise ValueError(f"{len(translations)} translations for {len(self.texts)} segments")
        for segment, translation in zip(self._segments, translations, strict=True):
            olds = [run.text for run in segment]
            for run, old, new in zip(segment, olds, deal(olds, translation), strict=True):
                if new != old:
                    run.put(new)
                    run.text = new
        self._segments = []
        return self._save()


def check_package(
    data: bytes, what: str, limits: Limits, *, needs: str, kind: str
) -> zipfile.ZipFile:
    """``data`` opened as a zip package that holds the member ``needs``, within ``limits``,
    no XML member declaring an entity (entity expansion is refused before any parser sees
    it) and no member that unpacks to more than the size the package declares for it
    (``zipfile`` cuts such a member at that size, but only after inflating in one call all
    that a single read gives it: 200 MiB for a 200 KiB member declared 30 KiB).

    Raises:
        DocumentError: not a zip, not a ``kind`` (naming what it looks like), or hostile.
        DocumentTooLarge: over ``limits``.
    """
    try:
        package = zipfile.ZipFile(io.BytesIO(data))
        members = package.infolist()
    except (zipfile.BadZipFile, zipfile.LargeZipFile, ValueError, EOFError) as e:
        raise DocumentError(
            f"{what}: not {with_article(kind)} (a broken or missing zip package: {e})"
        ) from None
    limits.check(what, len(members), limits.max_members, "files in its package")
    unpacked = sum(m.file_size for m in members)
    limits.check(what, unpacked, limits.max_unpacked_bytes, "bytes unpacked")
    names = {m.filename for m in members}
    if needs not in names:
        raise DocumentError(f"{what}: not {with_article(kind)} (no {needs}{_looks_like(names)})")
    for member in members:
        xml = member.filename.lower().endswith(XML_SUFFIXES)
        with reading(what, kind):
            if declares_entities(_unpacked(package, member, what, keep=xml)):
                raise DocumentError(
                    f"{what}: {member.filename} declares XML entities (refused: entity expansion)"
                )
    return package


ENTITY_DECLARATIONS = tuple("<!ENTITY".encode(code) for code in ("utf-8", "utf-16-le", "utf-16-be"))


def declares_entities(xml: bytes) -> bool:
    """Whether an XML member declares an entity, in UTF-8 or UTF-16 (either byte order)."""
    return any(declaration in xml for declaration in ENTITY_DECLARATIONS)


def _unpacked(package: zipfile.ZipFile, member: zipfile.ZipInfo, what: str, *, keep: bool) -> bytes:
    """``member`` unpacked a mebibyte at a time (its content where ``keep``, else b""),
    refused as soon as it gives more than its declared size, or when its checksum is not the
    one its package declares (a damaged member: every format's library would fail on it
    later, some while writing the translation)."""
    probe = copy.copy(member)  # allowed one byte more, so that a longer member shows itself
    probe.file_size = member.file_size + 1
    del probe.CRC  # zipfile's own check would count that byte: the checksum is ours below
    chunks, size, crc = [], 0, 0
    with package.open(probe) as stream:
        while chunk := stream.read(1 << 20):
            size += len(chunk)
            if size > member.file_size:
                raise DocumentError(
                    f"{what}: {member.filename} unpacks to more than the {member.file_size:,} "
                    "bytes its package declares (refused: a zip bomb)"
                )
            crc = zlib.crc32(chunk, crc)
            if keep:
                chunks.append(chunk)
    if crc != member.CRC:
        raise DocumentError(f"{what}: {member.filename} is damaged (its checksum does not match)")
    return b"".join(chunks)


def with_article(kind: str) -> str:
    """``kind`` with its article: "a Word document", "an EPUB e-book"."""
    return f"{'an' if kind[0] in 'AEIOU' else 'a'} {kind}"


def _looks_like(names: set[str]) -> str:
    known = {
        "word/document.xml": "a Word document",
        "ppt/presentation.xml": "a PowerPoint presentation",
        "xl/workbook.xml": "an Excel workbook",
        "META-INF/container.xml": "an EPUB e-book",
        "content.xml": "an OpenDocument file",
    }
    found = [kind for name, kind in known.items() if name in names]
    return f"; it looks like {found[0]}" if found else ""


@contextlib.contextmanager
def reading(what: str, kind: str) -> Iterator[None]:
    """Turn whatever a format's library raises on a broken file into one ``DocumentError``
    line (the libraries raise many types: zip, XML, key and value errors of their own)."""
    try:
        yield
    except DocumentError:
        raise
    except Exception as e:  # see the docstring
        message = str(e).splitlines()[0][:200] if str(e) else type(e).__name__
        raise DocumentError(f"{what}: not a readable {kind} ({message})") from None


def counted(n: int, noun: str) -> str:
    """``n`` and ``noun``, plural unless one: 1 text, 2 texts."""
    return f"{n:,} {noun}{'' if n == 1 else 's'}"


def decoded(data: bytes, what: str) -> str:
    """A text document's content (UTF-8, a byte-order mark allowed).

    Raises:
        DocumentError: not UTF-8.
    """
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as e:
        raise DocumentError(f"{what}: not UTF-8 text ({e.reason} at byte {e.start})") from None
