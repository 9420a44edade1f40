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
    from docx.oxml import OxmlElement
    from docx.oxml.ns import qn

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
