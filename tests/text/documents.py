"""Fixture documents, each made by its format's own library: styles, a table, a link, a
header and footer, notes or cues, numbers; and a stand-in translator."""

from __future__ import annotations

import io
import re

FAKE = re.compile(r"[a-z]")


def shout(texts: list[str]) -> list[str]:
    """The stand-in translation: every word upper-cased (numbers and spacing kept), so a
    run still holding a lower-case letter was not translated."""
    return [" ".join(word.upper() for word in text.split()) for text in texts]


def docx_bytes(*, runs: int = 0) -> bytes:
    """A Word document: a heading, a paragraph of bold, italic and linked runs, a table
    with a number, a header and a footer (``runs``: a paragraph of that many runs too)."""
    import docx
    from docx.opc.constants import RELATIONSHIP_TYPE
    from docx.oxml import OxmlElement, parse_xml
    from docx.oxml.ns import nsdecls, qn

    document = docx.Document()
    document.add_heading("The dogs of the park", level=1)
    paragraph = document.add_paragraph("A black dog ")
    paragraph.add_run("runs quickly").bold = True
    paragraph.add_run(" across the ")
    paragraph.add_run("green grass").italic = True
    paragraph.add_run(" near ")
    link = OxmlElement("w:hyperlink")
    link.set(
        qn("r:id"),
        paragraph.part.relate_to("https://example.org/park", RELATIONSHIP_TYPE.HYPERLINK, True),
    )
    run = OxmlElement("w:r")
    text = OxmlElement("w:t")
    text.text = "the old gate"
    run.append(text)
    link.append(run)
    paragraph._p.append(link)
    paragraph.add_run(" at 10:30.")
    table = document.add_table(rows=2, cols=2)
    for (r, c), value in {
        (0, 0): "Animal",
        (0, 1): "Count",
        (1, 0): "black dogs",
        (1, 1): "42",
    }.items():
        table.cell(r, c).text = value
    box = document.add_paragraph()._p  # a text box (VML), which python-docx cannot add
    box.append(
        parse_xml(
            f'<w:r {nsdecls("w")} xmlns:v="urn:schemas-microsoft-com:vml"><w:pict><v:shape>'
            "<v:textbox><w:txbxContent><w:p><w:r><w:t>A note in a box</w:t></w:r></w:p>"
            "</w:txbxContent></v:textbox></v:shape></w:pict></w:r>"
        )
    )
    section = document.sections[0]
    section.header.paragraphs[0].text = "A report about the park"
    section.footer.paragraphs[0].text = "Page footer text"
    if runs:
        many = document.add_paragraph()
        for k in range(runs):
            many.add_run(f"word{k} ").bold = k % 2 == 0
    out = io.BytesIO()
    document.save(out)
    return out.getvalue()


def pptx_bytes() -> bytes:
    """A presentation: a title slide, a text box with bold and linked runs inside a
    group, a table with a number, and speaker notes."""
    import pptx
    from pptx.util import Inches

    presentation = pptx.Presentation()
    slide = presentation.slides.add_slide(presentation.slide_layouts[5])  # title only
    slide.shapes.title.text = "Dogs in the park"
    group = slide.shapes.add_group_shape()
    box = group.shapes.add_textbox(Inches(1), Inches(2), Inches(6), Inches(1))
    paragraph = box.text_frame.paragraphs[0]
    first = paragraph.add_run()
    first.text = "A black dog "
    bold = paragraph.add_run()
    bold.text = "runs quickly"
    bold.font.bold = True
    linked = paragraph.add_run()
    linked.text = " to the gate."
    linked.hyperlink.address = "https://example.org/gate"
    table = slide.shapes.add_table(2, 2, Inches(1), Inches(4), Inches(4), Inches(1)).table
    for (r, c), value in {(0, 0): "Animal", (0, 1): "Count", (1, 0): "dogs", (1, 1): "7"}.items():
        table.cell(r, c).text = value
    slide.notes_slide.notes_text_frame.text = "Say hello to the audience."
    out = io.BytesIO()
    presentation.save(out)
    return out.getvalue()


SRT = """1
00:00:01,000 --> 00:00:03,500
A black dog <i>runs</i> on the grass,
and two men walk behind it.

2
00:00:04,000 --> 00:00:06,250
<b>Hello</b> to the 3 friends!

"""

VTT = """WEBVTT

STYLE
::cue { color: yellow }

NOTE a comment that stays

intro
00:00:01.000 --> 00:00:03.500 align:start line:0
A black dog <i>runs</i> on the grass,
<v Bob>and two men walk behind it.</v>

00:00:04.000 --> 00:00:06.250
Hello to the 3 friends!
"""

MARKDOWN = """# The dogs of the park

A black dog **runs quickly** across [the green grass](https://example.org/grass "Grass")
and jumps over `the_fence()` at 10:30.

> A quote about
> two dogs.

- first item
- second *item* here

| Animal | Count |
|--------|-------|
| black dogs | 42 |

```python
print("code stays")
```

See <https://example.org/auto> and ![a small picture](pic.png) here.
"""


def odt_bytes() -> bytes:
    """An OpenDocument text: a heading, a paragraph with a bold span and a link, a table
    with a number, a footnote, and a page header."""
    from odf.opendocument import OpenDocumentText
    from odf.style import Header, MasterPage, PageLayout, Style, TextProperties
    from odf.table import Table, TableCell, TableColumn, TableRow
    from odf.text import A, H, LineBreak, Note, NoteBody, NoteCitation, P, Span

    document = OpenDocumentText()
    bold = Style(name="Bold", family="text")
    bold.addElement(TextProperties(fontweight="bold"))
    document.automaticstyles.addElement(bold)
    layout = PageLayout(name="Layout")
    document.automaticstyles.addElement(layout)
    master = MasterPage(name="Standard", pagelayoutname=layout)
    header = Header()
    header.addElement(P(text="A report about the park"))
    master.addElement(header)
    document.masterstyles.addElement(master)
    document.text.addElement(H(outlinelevel=1, text="The dogs of the park"))
    paragraph = P(text="A black dog ")
    paragraph.addElement(Span(stylename=bold, text="runs quickly"))
    paragraph.addText(" to ")
    paragraph.addElement(A(href="https://example.org/gate", text="the old gate"))
    paragraph.addText(" at 10:30.")
    paragraph.addElement(LineBreak())
    paragraph.addText("Then it sleeps.")
    note = Note(noteclass="footnote", id="n1")
    note.addElement(NoteCitation(text="1"))
    body = NoteBody()
    body.addElement(P(text="A note about the dog."))
    note.addElement(body)
    paragraph.addElement(note)
    document.text.addElement(paragraph)
    table = Table(name="Animals")
    table.addElement(TableColumn(numbercolumnsrepeated=2))
    row = TableRow()
    for value in ("black dogs", "42"):
        cell = TableCell()
        cell.addElement(P(text=value))
        row.addElement(cell)
    table.addElement(row)
    document.text.addElement(table)
    out = io.BytesIO()
    document.save(out)
    return out.getvalue()


def odp_bytes() -> bytes:
    """An OpenDocument presentation: two slides with text boxes and notes."""
    from odf.draw import Frame, Page, TextBox
    from odf.opendocument import OpenDocumentPresentation
    from odf.presentation import Notes
    from odf.style import MasterPage, PageLayout
    from odf.text import P, Span

    document = OpenDocumentPresentation()
    layout = PageLayout(name="Layout")
    document.automaticstyles.addElement(layout)
    master = MasterPage(name="Default", pagelayoutname=layout)
    document.masterstyles.addElement(master)
    for n, words in enumerate(("Dogs in the park", "Cats on 3 chairs"), 1):
        page = Page(name=f"page{n}", masterpagename=master)
        frame = Frame(width="20cm", height="3cm", x="1cm", y="1cm")
        box = TextBox()
        paragraph = P(text=words + " ")
        paragraph.addElement(Span(text="and more"))
        box.addElement(paragraph)
        frame.addElement(box)
        page.addElement(frame)
        notes = Notes()
        notes_frame = Frame(width="20cm", height="3cm", x="1cm", y="5cm")
        notes_box = TextBox()
        notes_box.addElement(P(text=f"Say hello on slide {n}."))
        notes_frame.addElement(notes_box)
        notes.addElement(notes_frame)
        page.addElement(notes)
        document.presentation.addElement(page)
    out = io.BytesIO()
    document.save(out)
    return out.getvalue()


def epub_bytes() -> bytes:
    """An EPUB 3 e-book: two chapters with a heading, bold text, a link, code, a number."""
    from ebooklib import epub

    book = epub.EpubBook()
    book.set_identifier("aiayn-test-book")
    book.set_title("The park")
    book.set_language("en")
    first = epub.EpubHtml(title="Dogs", file_name="chap_01.xhtml", lang="en")
    first.content = (
        "<h1>Dogs</h1><p>A black dog <b>runs</b> in the <a href='chap_02.xhtml'>park</a>.</p>"
    )
    second = epub.EpubHtml(title="Cats", file_name="chap_02.xhtml", lang="en")
    second.content = "<h1>Cats</h1><p>Two cats sleep on 3 chairs.</p><pre>kept code</pre>"
    for chapter in (first, second):
        book.add_item(chapter)
    book.toc = (first, second)
    book.add_item(epub.EpubNcx())
    book.add_item(epub.EpubNav())
    book.spine = ["nav", first, second]
    out = io.BytesIO()
    epub.write_epub(out, book)
    return out.getvalue()
