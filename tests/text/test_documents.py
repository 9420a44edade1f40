"""Documents round-trip: each fixture, made by its format's library, is translated by a
stand-in (upper case) and read back by the same library: the same structure, every run
that had words translated, numbers, links, timings and code unchanged."""

from __future__ import annotations

import io
import re

import pytest

from aiayn.text.documents import (
    FORMATS,
    DocumentError,
    format_for,
    read_document,
    translate_document,
)

from .documents import (
    FAKE,
    MARKDOWN,
    SRT,
    VTT,
    docx_bytes,
    epub_bytes,
    odp_bytes,
    odt_bytes,
    pptx_bytes,
    shout,
)

docx = pytest.importorskip("docx")
pptx = pytest.importorskip("pptx")


def _docx_runs(document):
    """(text, bold, italic, link address) of every run, body, tables, headers, footers."""
    from aiayn.text.documents.office import _word_paragraphs

    found = []
    for paragraph in _word_paragraphs(document):
        for item in paragraph.iter_inner_content():
            runs = item.runs if hasattr(item, "address") else [item]
            address = getattr(item, "address", None)
            found += [(r.text, r.bold, r.italic, address) for r in runs]
    return found


def test_docx_keeps_its_structure_and_translates_every_run():
    source = docx_bytes()
    out = translate_document(source, "docx", shout, what="park.docx")
    before, after = docx.Document(io.BytesIO(source)), docx.Document(io.BytesIO(out))
    old, new = _docx_runs(before), _docx_runs(after)
    assert [r[1:] for r in new] == [r[1:] for r in old]  # styles and links, run by run
    assert ("", None, None, "https://example.org/park") not in new
    assert any(address == "https://example.org/park" for *_, address in new)
    worded = [n for o, n in zip(old, new, strict=True) if FAKE.search(o[0])]
    assert worded and all(text and not FAKE.search(text) for text, *_ in worded)
    assert len(after.tables) == len(before.tables) == 1
    assert after.tables[0].cell(1, 1).text == "42"
    assert after.sections[0].header.paragraphs[0].text == "A REPORT ABOUT THE PARK"
    assert after.sections[0].footer.paragraphs[0].text == "PAGE FOOTER TEXT"
    assert [p.style.name for p in after.paragraphs] == [p.style.name for p in before.paragraphs]
    assert "10:30." in after.paragraphs[1].text


def _pptx_runs(presentation):
    from aiayn.text.documents.office import _frames

    return [
        (run.text, run.font.bold, run.hyperlink.address)
        for frame in _frames(presentation)
        for paragraph in frame.paragraphs
        for run in paragraph.runs
    ]


def test_pptx_keeps_shapes_tables_notes_and_links():
    source = pptx_bytes()
    out = translate_document(source, "pptx", shout)
    before, after = pptx.Presentation(io.BytesIO(source)), pptx.Presentation(io.BytesIO(out))
    old, new = _pptx_runs(before), _pptx_runs(after)
    assert [r[1:] for r in new] == [r[1:] for r in old]
    assert all(text and not FAKE.search(text) for text, *_ in new)
    slide = after.slides[0]
    assert len(slide.shapes) == len(before.slides[0].shapes)
    assert slide.notes_slide.notes_text_frame.text == "SAY HELLO TO THE AUDIENCE."
    table = next(s for s in slide.shapes if s.has_table).table
    assert table.cell(1, 1).text == "7"


def _cues(name: str, text: str) -> list[tuple]:
    """(identifier, start, end, lines, text without tags) of every cue, as the format's own
    library (srt, webvtt-py) reads it."""
    if name == "srt":
        import srt

        cues = [(c.index, c.start, c.end, c.content) for c in srt.parse(text)]
    else:
        import webvtt

        cues = [(c.identifier, c.start, c.end, c.raw_text) for c in webvtt.from_string(text)]
    return [(i, a, b, t.count("\n"), re.sub(r"<[^>]*>", "", t)) for i, a, b, t in cues]


@pytest.mark.parametrize(("name", "source"), [("srt", SRT), ("vtt", VTT)])
def test_subtitles_keep_timings_tags_and_lines(name, source):
    out = translate_document(source.encode(), name, shout).decode()
    old, new = _cues(name, source), _cues(name, out)  # the library reads the output back
    assert [c[:4] for c in new] == [c[:4] for c in old] and len(new) == 2
    assert all(text and not FAKE.search(text) for *_, text in new)
    assert out.count("-->") == source.count("-->")
    for kept in ("00:00:01", "03,500" if name == "srt" else "03.500", "<i>", "</i>", "3"):
        assert kept in out
    assert "A BLACK DOG <i>RUNS</i> ON THE GRASS,\n" in out  # one sentence over two lines
    cues = re.sub(r"<[^>]*>", "", out.split("-->", 1)[1].replace("align:start line:0", ""))
    assert not FAKE.search(cues)
    if name == "vtt":
        for kept in ("STYLE\n::cue { color: yellow }", "NOTE a comment that stays", "intro\n"):
            assert kept in out
        assert "<v Bob>AND TWO MEN WALK BEHIND IT.</v>" in out


def test_markdown_changes_only_text():
    out = translate_document(MARKDOWN.encode(), "markdown", shout).decode()
    assert out.splitlines()[0] == "# THE DOGS OF THE PARK"
    assert "**RUNS QUICKLY**" in out or "**" in out.splitlines()[2]
    assert '](https://example.org/grass "Grass")' in out
    assert "`the_fence()`" in out and 'print("code stays")' in out
    assert "<https://example.org/auto>" in out and "![a small picture](pic.png)" in out
    assert "| BLACK DOGS | 42 |" in out and "|--------|-------|" in out
    assert "> A QUOTE ABOUT\n> TWO DOGS." in out
    from markdown_it import MarkdownIt

    parser = MarkdownIt("commonmark").enable(["table", "strikethrough"])
    kinds = [t.type for t in parser.parse(out)]
    assert kinds == [t.type for t in parser.parse(MARKDOWN)]


def test_markdown_escapes_what_a_translation_would_turn_into_markup():
    out = translate_document(b"Plain words here.\n", "markdown", lambda t: ["a *b* [c]"])
    assert out == b"a \\*b\\* \\[c\\]\n"


def test_a_segment_without_a_letter_or_digit_is_not_translated():
    calls = []
    out = translate_document(b"# !?\n\n---\n", "markdown", lambda t: calls.append(t) or t)
    assert calls == [] and out == b"# !?\n\n---\n"


def test_formats_are_found_by_suffix():
    assert format_for("Report.DOCX").name == "docx"
    assert format_for("notes.md").name == "markdown"
    assert format_for("a.txt") is None
    assert format_for("de.PO").name == "po" and format_for("strings.xml").name == "android"
    documents = {"docx", "pptx", "odt", "odp", "epub", "html", "srt", "vtt", "markdown"}
    catalogues = {"po", "xliff", "json", "arb", "yaml", "android", "properties"}
    assert set(FORMATS) == documents | catalogues
    assert {n for n, f in FORMATS.items() if f.localisation} == catalogues


def test_unknown_format_and_broken_text_are_one_line():
    with pytest.raises(DocumentError, match="unknown document format 'pdf'"):
        read_document(b"x", "pdf")
    with pytest.raises(DocumentError, match=r"sub\.srt: not UTF-8"):
        read_document(b"\xff\xfe\xff", "srt", what="sub.srt")


def test_an_html_page_is_one_document():
    page = (
        "<!DOCTYPE html><html><head><title>The park</title></head><body>"
        "<h1>Dogs</h1><p>A black dog <b>runs</b> in the <a href='/p'>park</a>.</p>"
        "<pre>kept code</pre></body></html>"
    )
    out = translate_document(page.encode(), "html", shout).decode()
    assert "<h1>DOGS</h1>" in out and "<pre>kept code</pre>" in out
    assert '<b>RUNS</b> IN THE <a href="/p">PARK.</a>' in out  # punctuation goes with words
    assert out.startswith("<!DOCTYPE html>")
    from bs4 import BeautifulSoup  # the library the HTML path parses with reads it back

    def shape(html: str) -> list[tuple]:
        return [(t.name, t.attrs) for t in BeautifulSoup(html, "html.parser").find_all(True)]

    assert shape(out) == shape(page)


def _odf_shape(data: bytes) -> list[tuple]:
    """Every element's name and attributes, in document order, from content and styles."""
    from odf.opendocument import load

    document = load(io.BytesIO(data))
    found = []
    stack = [document.topnode]
    while stack:
        node = stack.pop()
        if node.nodeType == node.ELEMENT_NODE:
            found.append((node.qname, tuple(sorted(node.attributes.items()))))
            stack += reversed(node.childNodes)
    return found


@pytest.mark.parametrize(("name", "make", "count"), [("odt", odt_bytes, 6), ("odp", odp_bytes, 4)])
def test_opendocument_keeps_every_element_and_translates_every_paragraph(name, make, count):
    pytest.importorskip("odf")
    source = make()
    out = translate_document(source, name, shout)
    assert _odf_shape(out) == _odf_shape(source)  # spans, links, notes, cells, slides
    texts = read_document(out, name).texts
    assert len(texts) == count and all(not FAKE.search(t) for t in texts)
    if name == "odt":
        assert "RUNS QUICKLY" in texts[1] and "10:30." in texts[1] and "42" in texts


def test_an_odt_named_odp_says_what_it_is():
    pytest.importorskip("odf")
    with pytest.raises(DocumentError, match=r"x\.odp: not an OpenDocument presentation \(it is"):
        read_document(odt_bytes(), "odp", what="x.odp")


def test_epub_chapters_are_translated_and_the_rest_copied():
    pytest.importorskip("ebooklib")
    import zipfile

    source = epub_bytes()
    out = translate_document(source, "epub", shout, target="de")
    old, new = zipfile.ZipFile(io.BytesIO(source)), zipfile.ZipFile(io.BytesIO(out))
    assert new.namelist() == old.namelist() and new.namelist()[0] == "mimetype"
    assert new.getinfo("mimetype").compress_type == zipfile.ZIP_STORED
    assert new.read("mimetype") == old.read("mimetype")
    package = new.read("EPUB/content.opf").decode()
    assert "<dc:title>THE PARK</dc:title>" in package and "<dc:language>de</dc:language>" in package
    as_before = package.replace("THE PARK", "The park").replace(">de<", ">en<")
    body = old.read("EPUB/content.opf").decode().split("\n", 1)[1]  # after the declaration
    assert as_before.split("\n", 1)[1].strip() == body.strip()  # nothing else changed
    ncx = new.read("EPUB/toc.ncx").decode()  # EPUB 2's table of contents
    assert "<text>THE PARK</text>" in ncx and "<text>DOGS</text>" in ncx
    assert "DOGS" in new.read("EPUB/nav.xhtml").decode()  # the table of contents
    chapter = new.read("EPUB/chap_01.xhtml").decode()
    assert '<b>RUNS</b> IN THE <a href="chap_02.xhtml">' in chapter
    assert "<pre>kept code</pre>" in new.read("EPUB/chap_02.xhtml").decode()
    from ebooklib import epub

    book = epub.read_epub(io.BytesIO(out), {"ignore_ncx": True})  # a reader opens it
    assert book.title == "THE PARK" and book.get_metadata("DC", "language") == [("de", {})]


def test_markdown_front_matter_is_kept():
    page = b"---\ntitle: the dogs\ntags: [park]\n---\n\nA dog runs.\n"
    out = translate_document(page, "markdown", shout)
    assert out == b"---\ntitle: the dogs\ntags: [park]\n---\n\nA DOG RUNS.\n"


def test_a_webvtt_cue_s_entities_reach_the_model_as_the_text_they_stand_for():
    """``Tom &amp; Jerry`` is translated as ``Tom & Jerry``, and what comes back is escaped
    again (a raw ``&`` or ``<`` would break the cue)."""
    pytest.importorskip("webvtt")
    from aiayn.text.documents import translate_document

    vtt = "WEBVTT\n\n00:00:01.000 --> 00:00:02.000\nTom &amp; Jerry &lt;3 run\n"
    seen: list[str] = []

    def translate(texts: list[str]) -> list[str]:
        seen.extend(texts)
        return [t.replace("run", "rennen & <lachen>") for t in texts]

    out = translate_document(vtt.encode(), "vtt", translate).decode()
    assert any("Tom & Jerry <3 run" in t for t in seen)
    assert "Tom &amp; Jerry &lt;3 rennen &amp; &lt;lachen&gt;" in out


def test_breaks_and_tabs_inside_a_word_run_are_kept():
    """A page break, a line break and a tab inside one run stay where they are (they were
    dropped when the run was rewritten), and the words beside them are translated."""
    docx = pytest.importorskip("docx")
    from docx.enum.text import WD_BREAK

    from aiayn.text.documents import translate_document

    document = docx.Document()
    run = document.add_paragraph().add_run("a dog runs")
    run.add_break(WD_BREAK.PAGE)
    run.add_text("a cat")
    run.add_tab()
    run.add_text("sleeps")
    run.add_break()
    run.add_text("the end")
    data = io.BytesIO()
    document.save(data)
    out = docx.Document(io.BytesIO(translate_document(data.getvalue(), "docx", shout)))
    xml = out.paragraphs[0]._p.xml
    assert 'w:type="page"' in xml and xml.count("<w:br") == 2 and "<w:tab/>" in xml
    texts = [e.text for e in out.paragraphs[0]._p.iter() if e.tag.endswith("}t")]
    assert texts == ["A DOG RUNS", "A CAT", "SLEEPS", "THE END"]


def test_a_slide_line_break_keeps_the_words_apart():
    pptx = pytest.importorskip("pptx")
    from pptx.util import Inches

    from aiayn.text.documents import read_document, translate_document

    deck = pptx.Presentation()
    slide = deck.slides.add_slide(deck.slide_layouts[6])
    frame = slide.shapes.add_textbox(Inches(1), Inches(1), Inches(4), Inches(1)).text_frame
    frame.paragraphs[0].add_run().text = "a dog running"
    frame.paragraphs[0].add_line_break()
    frame.paragraphs[0].add_run().text = "along the river"
    data = io.BytesIO()
    deck.save(data)
    assert read_document(data.getvalue(), "pptx").texts == ["a dog running along the river"]
    out = pptx.Presentation(io.BytesIO(translate_document(data.getvalue(), "pptx", shout)))
    paragraph = out.slides[0].shapes[0].text_frame.paragraphs[0]
    assert "<a:br" in paragraph._p.xml.replace("<a:br/>", "<a:br")
    assert [r.text for r in paragraph.runs] == ["A DOG RUNNING", "ALONG THE RIVER"]


def test_tracked_insertions_content_controls_and_smart_tags_are_translated():
    """Text in a tracked insertion (``w:ins``), a content control (``w:sdt``) and a smart
    tag is part of its sentence; deleted text (``w:del``) is left as it was."""
    docx = pytest.importorskip("docx")
    from docx.oxml import parse_xml
    from docx.oxml.ns import nsdecls

    from aiayn.text.documents import read_document, translate_document

    def text(words: str) -> str:
        return f"<w:r><w:t xml:space='preserve'>{words}</w:t></w:r>"

    document = docx.Document()
    paragraph = document.add_paragraph()
    for xml in (
        text("a dog "),
        f"<w:ins w:id='1' w:author='a'>{text('runs ')}</w:ins>",
        "<w:del w:id='2' w:author='a'><w:r><w:delText>walks </w:delText></w:r></w:del>",
        f"<w:sdt><w:sdtContent>{text('in the ')}</w:sdtContent></w:sdt>",
        f"<w:smartTag w:uri='u' w:element='place'>{text('park')}</w:smartTag>",
    ):
        paragraph._p.append(parse_xml(xml.replace(">", f" {nsdecls('w')}>", 1)))
    data = io.BytesIO()
    document.save(data)
    assert read_document(data.getvalue(), "docx").texts == ["a dog runs in the park"]
    out = docx.Document(io.BytesIO(translate_document(data.getvalue(), "docx", shout)))
    xml = out.paragraphs[0]._p.xml
    assert "RUNS" in xml and "IN THE" in xml and "PARK" in xml and "walks" in xml


def test_a_heading_ends_as_its_source_does():
    """A model that ends every translation with a full stop: a heading, a table cell and a
    caption without one get none; a sentence keeps its own; an ellipsis stays."""
    from aiayn.text.documents import read_document, translate_document

    def with_stop(texts: list[str]) -> list[str]:
        return [f"{t.upper().rstrip('.')}." for t in texts]

    data = docx_bytes()
    before = read_document(data, "docx").texts
    after = read_document(translate_document(data, "docx", with_stop), "docx").texts
    for source, translation in zip(before, after, strict=True):
        assert translation.endswith(".") == source.endswith("."), (source, translation)
