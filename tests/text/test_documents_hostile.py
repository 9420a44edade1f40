"""Hostile documents get one line (``DocumentError``), in bounded time and memory: a zip
bomb (in every zip format, and one that lies about its size), a broken zip, XML entity
expansion, 10,000 runs, a Word document named .pptx."""

from __future__ import annotations

import io
import re
import struct
import time
import tracemalloc
import zipfile
import zlib

import pytest

from aiayn.text.documents import DocumentError, DocumentTooLarge, Limits, translate_document

from .documents import docx_bytes, epub_bytes, odp_bytes, odt_bytes, pptx_bytes, shout

pytest.importorskip("docx")
ZIPPED = [("docx", docx_bytes), ("pptx", pptx_bytes), ("odt", odt_bytes), ("odp", odp_bytes)]
ZIPPED += [("epub", epub_bytes)]

LAUGHS = b"""<?xml version="1.0"?>
<!DOCTYPE lolz [<!ENTITY lol "lol"><!ENTITY lol2 "&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;">
<!ENTITY lol3 "&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;">]>
<w:document xmlns:w="http://schemas.openxmlformats.org/wordprocessingml/2006/main">
<w:body><w:p><w:r><w:t>&lol3;</w:t></w:r></w:p></w:body></w:document>"""


def _with_member(source: bytes, name: str, write) -> bytes:
    """``source``'s package with member ``name`` replaced (or added) by ``write(stream)``."""
    out = io.BytesIO()
    with zipfile.ZipFile(io.BytesIO(source)) as old, zipfile.ZipFile(out, "w") as new:
        for item in old.infolist():
            if item.filename != name:
                new.writestr(item, old.read(item))
        info = zipfile.ZipInfo(name)
        info.compress_type = zipfile.ZIP_DEFLATED
        with new.open(info, "w", force_zip64=True) as stream:
            write(stream)
    return out.getvalue()


def _bounded(call, *, seconds: float, megabytes: int):
    tracemalloc.start()
    start = time.perf_counter()
    try:
        return call()
    finally:
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
        assert time.perf_counter() - start < seconds
        assert peak < megabytes << 20, f"peak {peak >> 20} MiB"


@pytest.fixture(scope="module")
def bomb() -> bytes:
    """A Word document holding 200 MiB of zeros, a few hundred KB packed."""

    def zeros(stream):
        block = bytes(1 << 20)
        for _ in range(200):
            stream.write(block)

    return _with_member(docx_bytes(), "word/media/zeros.bin", zeros)


def test_a_zip_bomb_is_refused_before_unpacking(bomb):
    assert len(bomb) < 1 << 20
    with pytest.raises(DocumentTooLarge, match=r"bomb.docx: [\d,]+ bytes unpacked, more than"):
        _bounded(
            lambda: translate_document(bomb, "docx", shout, what="bomb.docx"),
            seconds=15,
            megabytes=64,
        )


@pytest.mark.parametrize(("name", "make"), ZIPPED, ids=[z[0] for z in ZIPPED])
def test_every_zip_format_refuses_a_package_over_the_unpacked_limit(name, make):
    """The 200 MiB bomb above, scaled down: 4 MiB of zeros against a limit of 1 MiB."""
    small = Limits(max_unpacked_bytes=1 << 20)
    packed = _with_member(make(), "zeros.bin", lambda s: s.write(bytes(4 << 20)))
    with pytest.raises(DocumentTooLarge, match=r"x: [\d,]+ bytes unpacked, more than the limit"):
        _bounded(
            lambda: translate_document(packed, name, shout, what="x", limits=small),
            seconds=15,
            megabytes=16,
        )


def _declaring(package: bytes, name: str, content: bytes) -> bytes:
    """``package`` with member ``name`` declared in the central directory as ``content``
    (its size and checksum), whatever it unpacks to: a bomb that says it is small, which
    ``zipfile`` alone reads as ``content`` after inflating all of it at once."""
    entry = next(
        m.start()
        for m in re.finditer(re.escape(b"PK\x01\x02"), package)  # central directory entries
        if package[m.start() + 46 : m.start() + 46 + len(name)] == name.encode()
    )
    crc, size = struct.pack("<I", zlib.crc32(content)), struct.pack("<I", len(content))
    return (
        package[: entry + 16]
        + crc
        + package[entry + 20 : entry + 24]
        + size
        + package[entry + 28 :]
    )


def test_a_zip_bomb_that_declares_a_small_size_is_read_no_further():
    source = docx_bytes()
    xml = zipfile.ZipFile(io.BytesIO(source)).read("word/document.xml")

    def padded(stream):  # the document, then 200 MiB of spaces (well-formed XML still)
        stream.write(xml)
        for _ in range(200):
            stream.write(b" " * (1 << 20))

    liar = _declaring(_with_member(source, "word/document.xml", padded), "word/document.xml", xml)
    assert len(liar) < 1 << 20
    assert zipfile.ZipFile(io.BytesIO(liar)).read("word/document.xml") == xml  # zipfile's view
    bomb = r"^lie.docx: word/document.xml unpacks to more than the [\d,]+ bytes its package"
    with pytest.raises(DocumentError, match=bomb):
        _bounded(
            lambda: translate_document(liar, "docx", shout, what="lie.docx"),
            seconds=15,
            megabytes=64,
        )


KINDS = {
    "docx": "a Word document",
    "pptx": "a PowerPoint file",
    "odt": "an OpenDocument text",
    "odp": "an OpenDocument presentation",
    "epub": "an EPUB e-book",
}


@pytest.mark.parametrize(("name", "make"), ZIPPED, ids=[z[0] for z in ZIPPED])
def test_a_broken_zip_is_one_line(name, make):
    whole = make()
    for broken in (whole[: len(whole) // 2], b"PK\x03\x04 not a zip", b""):
        with pytest.raises(DocumentError, match=rf"^x.{name}: not {KINDS[name]} \(a broken"):
            _bounded(
                lambda b=broken: translate_document(b, name, shout, what=f"x.{name}"),
                seconds=15,
                megabytes=32,
            )


@pytest.mark.parametrize(
    ("name", "make", "member"),
    [
        ("docx", docx_bytes, "word/document.xml"),
        ("pptx", pptx_bytes, "ppt/slides/slide1.xml"),
        ("odt", odt_bytes, "content.xml"),
        ("odp", odp_bytes, "content.xml"),
        ("epub", epub_bytes, "EPUB/chap_01.xhtml"),
    ],
)
def test_xml_entities_are_refused_before_any_parser(name, make, member):
    hostile = _with_member(make(), member, lambda s: s.write(LAUGHS))
    with pytest.raises(DocumentError, match=f"{re.escape(member)} declares XML entities"):
        _bounded(
            lambda: translate_document(hostile, name, shout), seconds=15, megabytes=32
        )  # contended: generous


def test_ten_thousand_runs_are_translated_in_bounded_time_or_refused_by_the_limit():
    many = docx_bytes(runs=10_000)
    start = time.perf_counter()
    out = translate_document(many, "docx", shout)  # linear: ~2.5 s on a 2-core EPYC
    assert time.perf_counter() - start < 30
    assert b"WORD9999" in zipfile.ZipFile(io.BytesIO(out)).read("word/document.xml")
    with pytest.raises(DocumentTooLarge, match=r"10,0\d\d runs, more than the limit of 5,000"):
        translate_document(many, "docx", shout, limits=Limits(max_runs=5_000))


def test_a_word_document_named_pptx_says_what_it_is():
    word = docx_bytes()
    with pytest.raises(DocumentError, match=r"x.pptx: not a PowerPoint file .*a Word document"):
        _bounded(
            lambda: translate_document(word, "pptx", shout, what="x.pptx"),
            seconds=15,
            megabytes=32,
        )


def test_too_many_bytes_members_or_cues():
    with pytest.raises(DocumentTooLarge, match="bytes, more than the limit of 10"):
        translate_document(b"x" * 11, "srt", shout, limits=Limits(max_bytes=10))
    cues = "".join(f"{k}\n00:00:0{k},000 --> 00:00:0{k},500\nline {k}\n\n" for k in range(1, 4))
    with pytest.raises(DocumentTooLarge, match="3 cues, more than the limit of 2"):
        translate_document(cues.encode(), "srt", shout, limits=Limits(max_parts=2))


def _damaged(source: bytes, name: str) -> bytes:
    """``source``'s package with member ``name`` stored and one byte of it changed: its
    checksum no longer matches (what a truncated download or a bad disk gives)."""
    out = io.BytesIO()
    with zipfile.ZipFile(io.BytesIO(source)) as old, zipfile.ZipFile(out, "w") as new:
        for item in old.infolist():
            data = old.read(item)
            if item.filename == name:
                item.compress_type = zipfile.ZIP_STORED
            new.writestr(item, data)
    raw = bytearray(out.getvalue())
    with zipfile.ZipFile(io.BytesIO(bytes(raw))) as package:
        info = package.getinfo(name)
    header = struct.unpack("<IHHHHHIIIHH", raw[info.header_offset : info.header_offset + 30])
    start = info.header_offset + 30 + header[9] + header[10]  # past the name and extra field
    raw[start] ^= 0x01
    return bytes(raw)


@pytest.mark.parametrize(
    ("name", "make", "member"),
    [
        ("docx", docx_bytes, "word/document.xml"),
        ("pptx", pptx_bytes, "ppt/slides/slide1.xml"),
        ("odt", odt_bytes, "mimetype"),
        ("odt", odt_bytes, "content.xml"),
        ("odp", odp_bytes, "mimetype"),
        ("epub", epub_bytes, "mimetype"),
        ("epub", epub_bytes, "EPUB/chap_01.xhtml"),
    ],
)
def test_a_damaged_member_of_any_zip_format_is_one_line(name, make, member):
    damaged = _damaged(make(), member)
    with pytest.raises(DocumentError, match=f"^x.{name}: {re.escape(member)} is damaged"):
        translate_document(damaged, name, shout, what=f"x.{name}")


@pytest.mark.parametrize(("name", "make"), [("odt", odt_bytes), ("odp", odp_bytes)])
def test_an_opendocument_without_its_mimetype_is_one_line(name, make):
    out = io.BytesIO()
    with zipfile.ZipFile(io.BytesIO(make())) as old, zipfile.ZipFile(out, "w") as new:
        for item in old.infolist():
            if item.filename != "mimetype":
                new.writestr(item, old.read(item))
    with pytest.raises(DocumentError, match=f"^x.{name}: not an? .*no mimetype"):
        translate_document(out.getvalue(), name, shout, what=f"x.{name}")


@pytest.mark.parametrize(
    ("page", "words"),
    [
        ("<div>" * 300 + "deep" + "</div>" * 300, "nested deeper than"),
        ("<p>a</p>" * 100_001, "more than 100,000 elements"),
    ],
)
def test_html_too_deep_or_too_large_is_one_line(page, words):
    with pytest.raises(DocumentError, match=f"^x.html: .*{words}"):
        translate_document(page.encode(), "html", shout, what="x.html", limits=Limits())


def test_a_space_repeated_two_hundred_million_times_costs_nothing():
    """Three ``<text:s text:c="200000000"/>`` in a 2 KB .odt: read as a bounded run of
    spaces (the element is written back as it was), in bounded memory and time."""
    from odf.opendocument import OpenDocumentText
    from odf.text import P, S

    document = OpenDocumentText()
    paragraph = P(text="A dog")
    for _ in range(3):
        paragraph.addElement(S(c="200000000"))
        paragraph.addText("runs")
    document.text.addElement(paragraph)
    data = io.BytesIO()
    document.save(data)
    out = _bounded(
        lambda: translate_document(data.getvalue(), "odt", shout, what="x.odt"),
        seconds=15,
        megabytes=64,
    )
    assert b'text:c="200000000"' in zipfile.ZipFile(io.BytesIO(out)).read("content.xml")


@pytest.mark.parametrize("encoding", ["utf-16-le", "utf-16-be", "utf-16"])
def test_xml_entities_in_utf16_are_refused_too(encoding):
    text = LAUGHS.decode().replace('encoding="utf-8"', "")
    hostile = _with_member(
        docx_bytes(), "word/document.xml", lambda s: s.write(text.encode(encoding))
    )
    with pytest.raises(DocumentError, match="declares XML entities"):
        translate_document(hostile, "docx", shout)


def test_a_document_given_as_text_is_one_line():
    with pytest.raises(DocumentError, match=r"a document is given as bytes.*not str"):
        translate_document("<p>a dog</p>", "html", shout, what="x.html")
