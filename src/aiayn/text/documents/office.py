"""Word (.docx, python-docx) and PowerPoint (.pptx, python-pptx) documents as runs.

A paragraph is a segment; its runs (those inside hyperlinks too) carry their formatting.
Word: the body's paragraphs and tables (nested tables too, a merged cell once), text boxes,
and every section's own headers and footers (first-page and even-page ones too). PowerPoint: every
slide's shapes (inside groups too), its tables' cells and its notes.
"""

from __future__ import annotations

import io
from collections.abc import Iterator

import docx
import pptx
from docx.document import Document as WordDocument
from docx.oxml.ns import qn
from docx.table import Table
from docx.text.paragraph import Paragraph
from pptx.enum.shapes import MSO_SHAPE_TYPE
from pptx.oxml.ns import qn as pptx_qn
from pptx.text.text import _Run as _PptxRun

from aiayn.text.documents.base import Limits, Run, RunDocument, check_package, reading

_XML_SPACE = "{http://www.w3.org/XML/1998/namespace}space"
_TEXT = qn("w:t")
_BREAKS = {qn("w:br"): "\n", qn("w:cr"): "\n", qn("w:tab"): "\t"}  # kept as they are
# what a paragraph's walk does not enter: properties, deletions, text boxes (paragraphs of
# their own) and the fallback copy of alternate content
_FALLBACK = "{http://schemas.openxmlformats.org/markup-compatibility/2006}Fallback"
_NOT_TEXT = frozenset(
    {*(qn(n) for n in ("w:pPr", "w:rPr", "w:del", "w:moveFrom", "w:txbxContent")), _FALLBACK}
)
_SLIDE_RUN, _SLIDE_BREAK = pptx_qn("a:r"), pptx_qn("a:br")


def read_docx(data: bytes, what: str, limits: Limits) -> RunDocument:
    """A Word document's paragraphs, tables, headers and footers (module docstring)."""
    check_package(data, what, limits, needs="word/document.xml", kind="Word document")
    with reading(what, "Word document"):
        document = docx.Document(io.BytesIO(data))
        segments = [_word_runs(p) for p in _word_paragraphs(document)]
    return RunDocument(segments, lambda: _saved(document), what=what, limits=limits)


def _word_paragraphs(document: WordDocument) -> Iterator[Paragraph]:
    yield from _blocks(document.iter_inner_content())
    yield from _text_boxes(document.element.body, document._body)
    seen: set[int] = set()
    for section in document.sections:
        for part in (
            section.header,
            section.first_page_header,
            section.even_page_header,
            section.footer,
            section.first_page_footer,
            section.even_page_footer,
        ):
            if part.is_linked_to_previous or id(part.part) in seen:
                continue
            seen.add(id(part.part))
            yield from _blocks(part.iter_inner_content())
            yield from _text_boxes(part._element, part)


def _blocks(blocks: Iterator[Paragraph | Table]) -> Iterator[Paragraph]:
    for block in blocks:
        if isinstance(block, Paragraph):
            yield block
            continue
        cells: dict[int, object] = {}  # held, so that no id is reused by another cell
        for row in block.rows:
            for cell in row.cells:
                if id(cell._tc) not in cells:  # a merged cell appears once per grid column
                    cells[id(cell._tc)] = cell._tc
                    yield from _blocks(cell.iter_inner_content())


def _text_boxes(element, parent) -> Iterator[Paragraph]:
    """The paragraphs of the text boxes under ``element`` (a drawing's and its VML
    fallback's: both are shown, by different programs), which python-docx does not list."""
    for paragraph in element.xpath(".//w:txbxContent//w:p"):
        yield Paragraph(paragraph, parent)


def _word_runs(paragraph: Paragraph) -> list[Run]:
    """A paragraph's text as runs, in document order, wherever it stands: in runs, links,
    tracked insertions, content controls, smart tags and fields. Each ``w:t`` is a run of
    its own; a line or page break and a tab (``w:br``, ``w:cr``, ``w:tab``) are runs of
    their own, kept as they are (a page break stays a page break), and so are pictures and
    fields' codes. Deleted text (``w:del``) is left alone, and text boxes are paragraphs of
    their own (``_text_boxes``)."""
    out = []
    stack = list(reversed(paragraph._p))  # the paragraph's children, walked in order
    while stack:
        node = stack.pop()
        if node.tag == _TEXT:
            out.append(Run(node.text or "", _text_put(node)))
        elif node.tag in _BREAKS:
            out.append(Run(_BREAKS[node.tag], _kept))
        elif isinstance(node.tag, str) and node.tag not in _NOT_TEXT:
            stack.extend(reversed(node))
    return out


def _text_put(element):
    def put(text: str) -> None:
        element.text = text
        element.set(_XML_SPACE, "preserve")

    return put


def _kept(_: str) -> None:
    return None


def read_pptx(data: bytes, what: str, limits: Limits) -> RunDocument:
    """A presentation's slides (shapes, groups, tables) and notes (module docstring)."""
    check_package(data, what, limits, needs="ppt/presentation.xml", kind="PowerPoint file")
    with reading(what, "PowerPoint file"):
        presentation = pptx.Presentation(io.BytesIO(data))
        limits.check(what, len(presentation.slides), limits.max_parts, "slides")
        segments = [
            _slide_runs(paragraph)
            for frame in _frames(presentation)
            for paragraph in frame.paragraphs
        ]
    return RunDocument(segments, lambda: _saved(presentation), what=what, limits=limits)


def _frames(presentation) -> Iterator:
    for slide in presentation.slides:
        yield from _shape_frames(slide.shapes)
        if slide.has_notes_slide and slide.notes_slide.notes_text_frame is not None:
            yield slide.notes_slide.notes_text_frame


def _shape_frames(shapes) -> Iterator:
    for shape in shapes:
        if shape.shape_type == MSO_SHAPE_TYPE.GROUP:
            yield from _shape_frames(shape.shapes)
        elif shape.has_text_frame:
            yield shape.text_frame
        elif getattr(shape, "has_table", False) and shape.has_table:
            for cell in shape.table.iter_cells():
                if not cell.is_spanned:  # a merged cell's text is in its origin cell
                    yield cell.text_frame


def _slide_runs(paragraph) -> list[Run]:
    """A slide paragraph's runs in order, a line break (``a:br``) a run of its own, kept
    (``paragraph.runs`` leaves it out, and its words would glue together)."""
    out = []
    for child in paragraph._p:
        if child.tag == _SLIDE_RUN:
            run = _PptxRun(child, paragraph)
            out.append(Run(run.text, _pptx_put(run)))
        elif child.tag == _SLIDE_BREAK:
            out.append(Run("\n", _kept))
    return out


def _pptx_put(run):
    def put(text: str) -> None:
        run.text = text

    return put


def _saved(document) -> bytes:
    out = io.BytesIO()
    document.save(out)
    return out.getvalue()
