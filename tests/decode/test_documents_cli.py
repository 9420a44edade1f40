"""Documents through ``aiayn translate`` and ``Translator.translate_document`` with a model
trained in the test: the format chosen by suffix or ``--format``, each segment translated
as the model translates it alone, the structure kept, bad documents one line (exit 2)."""

from __future__ import annotations

import io

import pytest

from aiayn.cli import main
from aiayn.text.documents import read_document
from aiayn.translate.translator import SearchOptions, Translator

from ..text.documents import SRT, docx_bytes, pptx_bytes

docx = pytest.importorskip("docx")


@pytest.fixture(scope="module")
def translator(trained_model_dir):
    return Translator.from_dir(trained_model_dir)


def _alone(translator, texts, beam):
    return [translator.translate([t], SearchOptions(beam=beam))[0][0].text for t in texts]


def test_a_docx_by_its_suffix_translates_each_paragraph_as_alone(
    trained_model_dir, translator, tmp_path
):
    source = tmp_path / "park.docx"
    source.write_bytes(docx_bytes())
    out = tmp_path / "park.de.docx"
    argv = ["translate", "--model", str(trained_model_dir), "-i", str(source), "-o", str(out)]
    assert main([*argv, "--beam", "2"]) == 0
    before = read_document(source.read_bytes(), "docx")
    after = docx.Document(io.BytesIO(out.read_bytes()))
    expected = _alone(translator, before.texts, beam=2)
    from aiayn.text.runs import segment_text

    paragraphs = [
        segment_text([r.text for r in p.runs]) for p in after.paragraphs if p.text.strip()
    ]
    assert paragraphs[0] == expected[0]  # the heading
    assert len(after.tables) == 1 and after.tables[0].cell(1, 1).text == expected[5]
    assert after.sections[0].footer.paragraphs[0].text == expected[-1]


def test_format_option_and_the_python_api_agree(trained_model_dir, translator, tmp_path):
    source = tmp_path / "subtitles.txt"  # the suffix says text; --format says srt
    source.write_text(SRT, encoding="utf-8")
    out = tmp_path / "out.srt"
    argv = ["translate", "--model", str(trained_model_dir), "-i", str(source), "-o", str(out)]
    assert main([*argv, "--format", "srt", "--beam", "1"]) == 0
    api = translator.translate_document(SRT.encode(), "srt", SearchOptions(beam=1))
    assert out.read_bytes() == api
    assert api.decode().count("-->") == 2 and "00:00:04,000 --> 00:00:06,250" in api.decode()


def test_pptx_through_the_api_keeps_notes(translator):
    out = translator.translate_document(pptx_bytes(), "pptx", SearchOptions(beam=1))
    document = read_document(out, "pptx")
    assert len(document.texts) == 7


@pytest.mark.parametrize(
    ("name", "content", "expected"),
    [
        ("slides.pptx", docx_bytes(), "slides.pptx: not a PowerPoint file"),
        ("broken.docx", b"PK\x03\x04broken", "broken.docx: not a Word document"),
        ("sub.vtt", b"\xff\xfe", "sub.vtt: not UTF-8"),
    ],
)
def test_a_bad_document_is_one_line_and_exit_2(
    trained_model_dir, tmp_path, capsys, name, content, expected
):
    source = tmp_path / name
    source.write_bytes(content)
    out = tmp_path / f"out-{name}"
    argv = ["translate", "--model", str(trained_model_dir), "-i", str(source), "-o", str(out)]
    assert main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and expected in err[0] and not out.exists()


def test_nbest_is_refused_for_a_document(trained_model_dir, tmp_path, capsys):
    source = tmp_path / "a.srt"
    source.write_text(SRT, encoding="utf-8")
    argv = ["translate", "--model", str(trained_model_dir), "-i", str(source), "--nbest", "2"]
    assert main(argv) == 2
    assert "not a srt document" in capsys.readouterr().err


def test_protected_spans_survive_in_a_document(translator):
    """Placeholders and URLs in a run are kept verbatim (``aiayn.text.protect``, on by
    default), the run's formatting around them too."""
    document = docx.Document()
    paragraph = document.add_paragraph("Dear {{name}}, the dog ")
    paragraph.add_run("runs").bold = True
    paragraph.add_run(" to https://example.org/park today.")
    source = io.BytesIO()
    document.save(source)
    out = translator.translate_document(source.getvalue(), "docx", SearchOptions(beam=2))
    text = docx.Document(io.BytesIO(out)).paragraphs[0].text
    assert text.count("{{name}}") == 1 and text.count("https://example.org/park") == 1
    runs = docx.Document(io.BytesIO(out)).paragraphs[0].runs
    assert [r.bold for r in runs] == [None, True, None]


def test_a_document_from_standard_input_to_standard_output(
    trained_model_dir, translator, monkeypatch, capsysbinary
):
    import sys

    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(SRT.encode())))
    argv = ["translate", "--model", str(trained_model_dir), "--format", "srt", "--beam", "1"]
    assert main(argv) == 0
    out = capsysbinary.readouterr().out
    assert out == translator.translate_document(SRT.encode(), "srt", SearchOptions(beam=1))
