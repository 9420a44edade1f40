"""Hostile documents get one line (``DocumentError``), in bounded time and memory: a zip
bomb, a broken zip, XML entity expansion, 10,000 runs, a Word document named .pptx."""

from __future__ import annotations

import io
import re
import time
import tracemalloc
import zipfile

import pytest

from aiayn.text.documents import DocumentError, DocumentTooLarge, Limits, translate_document

from .documents import docx_bytes, epub_bytes, odt_bytes, shout

pytest.importorskip("docx")

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


def test_a_broken_zip_is_one_line():
    whole = docx_bytes()
    for broken in (whole[: len(whole) // 2], b"PK\x03\x04 not a zip", b""):
        with pytest.raises(DocumentError, match=r"^x.docx: not a Word document \(a broken"):
            translate_document(broken, "docx", shout, what="x.docx")


@pytest.mark.parametrize(
    ("name", "make", "member"),
    [
        ("docx", docx_bytes, "word/document.xml"),
        ("odt", odt_bytes, "content.xml"),
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
    with pytest.raises(DocumentError, match=r"x.pptx: not a PowerPoint file .*a Word document"):
        translate_document(docx_bytes(), "pptx", shout, what="x.pptx")


def test_too_many_bytes_members_or_cues():
    with pytest.raises(DocumentTooLarge, match="bytes, more than the limit of 10"):
        translate_document(b"x" * 11, "srt", shout, limits=Limits(max_bytes=10))
    cues = "".join(f"{k}\n00:00:0{k},000 --> 00:00:0{k},500\nline {k}\n\n" for k in range(1, 4))
    with pytest.raises(DocumentTooLarge, match="3 cues, more than the limit of 2"):
        translate_document(cues.encode(), "srt", shout, limits=Limits(max_parts=2))
