"""Uploads are read and written in a document process: the same file as in the server's own
process, a document that takes too long ends its process (413) and the next is served by a
fresh one, and a broken one is one line."""

from __future__ import annotations

import pytest

from aiayn.text.documents import DocumentError, DocumentTooLarge, Limits, translate_document
from aiayn.workers.document_process import DocumentLimits, DocumentProcess

from ..text.documents import SRT


def upper(texts: list[str]) -> list[str]:
    return [t.upper() for t in texts]


@pytest.fixture(scope="module")
def process():
    process = DocumentProcess(DocumentLimits(seconds=5.0))
    yield process
    process.close()


def test_a_document_read_and_written_in_its_process_is_as_in_this_one(process):
    options = {"what": "a.srt", "limits": Limits(), "retranslate": False}
    texts = process.read(SRT.encode(), "srt", **options)
    out, summary = process.render(upper(texts), what="a.srt", target=None)
    assert out == translate_document(SRT.encode(), "srt", upper)
    assert summary == "a.srt: 2 texts translated"


def test_a_broken_document_is_one_line(process):
    with pytest.raises(DocumentError, match=r"x\.docx: not a Word document") as raised:
        process.read(b"PK\x03\x04broken", "docx", what="x.docx", limits=Limits(), retranslate=False)
    assert "\n" not in str(raised.value)


def test_a_document_over_its_time_ends_its_process_and_the_next_gets_a_new_one():
    process = DocumentProcess(DocumentLimits(seconds=0.5))
    try:
        slow = ("Some *text* here.\n\n" * 400_000).encode()  # about 8 MB of Markdown
        limits = Limits(max_bytes=64 << 20, max_segments=10**6, max_runs=10**7)
        with pytest.raises(DocumentTooLarge, match=r"big\.md: reading it took too long"):
            process.read(slow, "markdown", what="big.md", limits=limits, retranslate=False)
        texts = process.read(SRT.encode(), "srt", what="a.srt", limits=Limits(), retranslate=False)
        assert len(texts) == 2
    finally:
        process.close()
