"""Natural text through the Translator: the model directory's preprocessing record applied
and undone, paragraphs split and joined back, HTML, and the raw research mode."""

import dataclasses
import gzip
import json
import os
import select
import shutil
import subprocess
import sys
from itertools import islice
from pathlib import Path

import pytest

from aiayn.data.tokenizer_files import TOKENIZER_FILE, read_tokenizer_info
from aiayn.errors import ConfigError
from aiayn.text import MOSES_LOWERCASED, NO_PREPROCESSING, TextProcessor, split_paragraph
from aiayn.translate.translator import SearchOptions, Translator

GREEDY = SearchOptions(beam=1)


@pytest.fixture(scope="module")
def translator(trained_model_dir):
    return Translator.from_dir(trained_model_dir)


@pytest.fixture(scope="module")
def lowercased_dir(trained_model_dir, tmp_path_factory):
    """The trained model with a record saying its text was Moses-tokenised and lowercased."""
    directory = tmp_path_factory.mktemp("moses") / "model"
    shutil.copytree(trained_model_dir, directory)
    path = directory / TOKENIZER_FILE
    info = json.loads(path.read_text())
    info["src_preprocessing"] = info["tgt_preprocessing"] = dataclasses.asdict(MOSES_LOWERCASED)
    info["src_lang"], info["tgt_lang"] = "en", "de"
    path.write_text(json.dumps(info))
    return directory


def _test_sentences(multi30k_dir, n):
    """The first ``n`` test2016 sentences that the splitter finds again in a paragraph."""
    with gzip.open(multi30k_dir / "test_2016_flickr.en.gz", "rt", encoding="utf-8") as f:
        lines = [line.strip() for line in islice(f, 200) if line.strip().endswith(".")]
    found = []
    for line in lines:
        if split_paragraph(" ".join([*found, line]), "en").sentences == (*found, line):
            found.append(line)
        if len(found) == n:
            return found
    raise AssertionError("too few test sentences split cleanly")


@pytest.mark.parametrize("beam", [1, 3])
def test_a_paragraph_translates_as_its_sentences_one_a_line(translator, multi30k_dir, beam):
    sentences = _test_sentences(multi30k_dir, 6)
    options = SearchOptions(beam=beam)
    alone = [h[0].text for h in translator.translate(sentences, options)]
    paragraph = translator.translate([" ".join(sentences)], options)[0][0].text
    assert paragraph == " ".join(alone)
    unsplit = translator.translate(
        [" ".join(sentences)], dataclasses.replace(options, split_sentences=False)
    )
    assert unsplit[0][0].text != paragraph  # one long input is not the same work


def test_line_breaks_and_spacing_are_kept(translator):
    text = "the dog runs\n\n  a cat sleeps .\nthe big house"
    out = translator.translate([text], GREEDY)[0][0].text
    lines = [translator.translate([t], GREEDY)[0][0].text for t in text.split("\n") if t.strip()]
    lines = [line.strip() for line in lines]
    assert out == f"{lines[0]}\n\n  {lines[1]}\n{lines[2]}"


def test_the_record_is_applied_to_inputs_and_undone_on_outputs(lowercased_dir):
    translator = Translator.from_dir(lowercased_dir)
    assert translator.src_text.steps == MOSES_LOWERCASED
    src, tgt = TextProcessor(MOSES_LOWERCASED, "en"), TextProcessor(MOSES_LOWERCASED, "de")
    for text in ["The Dog runs, the cat's ball.", 'THE "big" HOUSE']:
        raw = SearchOptions(beam=1, text="raw")
        decoded = translator.translate([src.prepare(text)], raw)[0][0].text
        assert translator.translate([text], GREEDY)[0][0].text == tgt.restore(decoded)


def test_raw_text_goes_to_the_subword_model_untouched(lowercased_dir):
    translator = Translator.from_dir(lowercased_dir)
    text = "the dog runs . the cat &apos;s ball"
    ids = translator.src_tokenizer.encode([text])
    raw = translator.translate([f"  {text} "], SearchOptions(beam=1, text="raw"))[0][0]
    assert raw.text == translator.translate_ids(ids, GREEDY)[0][0].text


def test_html_is_translated_segment_by_segment(translator):
    html = "<p>the dog <b>runs</b> .<br>a cat sleeps</p><p>.</p>"
    out = translator.translate([html], SearchOptions(beam=1, format="html"))[0][0].text
    first, second = (
        translator.translate([t], GREEDY)[0][0].text for t in ("the dog runs .", "a cat sleeps")
    )
    assert out.startswith("<p>") and out.endswith("<br/>" + second + "</p><p>.</p>")
    assert out.count("<b>") == 1 and out.replace("<b>", "").replace("</b>", "").startswith(
        "<p>" + first
    )


def test_nbest_of_a_paragraph_joins_its_sentences_hypotheses(translator):
    options = SearchOptions(beam=3, nbest=2)
    single = translator.translate(["the dog runs", "a cat sleeps"], options)
    joined = translator.translate(["the dog runs\na cat sleeps"], options)[0]
    assert [h.text for h in joined] == [f"{a.text}\n{b.text}" for a, b in zip(*single, strict=True)]
    assert joined[0].score == pytest.approx((single[0][0].score + single[1][0].score) / 2)


@pytest.mark.parametrize(("field", "value"), [("text", "cooked"), ("format", "pdf")])
def test_unknown_text_options_are_refused(translator, field, value):
    with pytest.raises(ConfigError, match=field):
        translator.translate(["a"], SearchOptions(**{field: value}))


@pytest.mark.parametrize(
    ("pretokenized", "expected"), [(True, MOSES_LOWERCASED), (False, NO_PREPROCESSING)]
)
def test_an_older_tokenizer_json_reads_with_the_record_its_flag_implies(
    trained_model_dir, tmp_path, pretokenized, expected
):
    shutil.copytree(trained_model_dir, tmp_path / "m")
    path = tmp_path / "m" / TOKENIZER_FILE
    info = json.loads(path.read_text())
    del info["src_preprocessing"], info["tgt_preprocessing"]
    info["pretokenized"] = pretokenized
    path.write_text(json.dumps(info))
    read = read_tokenizer_info(tmp_path / "m")
    assert read.src_preprocessing == read.tgt_preprocessing == expected


def test_a_trained_model_records_its_preprocessing(trained_model_dir):
    info = json.loads((trained_model_dir / TOKENIZER_FILE).read_text())
    assert info["src_preprocessing"] == dataclasses.asdict(NO_PREPROCESSING)
    assert read_tokenizer_info(trained_model_dir).tgt_preprocessing == NO_PREPROCESSING


def test_translate_answers_each_line_of_a_pipe_that_stays_open(trained_model_dir, tmp_path):
    """`aiayn translate` from a pipe writes a line's translation before the next line
    (or the end of the input) comes."""
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2] / "src")}
    command = [sys.executable, "-m", "aiayn", "translate", "--model", str(trained_model_dir)]
    proc = subprocess.Popen(
        [*command, "--beam", "1"], stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=env
    )
    try:
        answers = []
        for line in ("the dog runs", "a cat sleeps"):
            proc.stdin.write(f"{line}\n".encode())
            proc.stdin.flush()
            ready = select.select([proc.stdout], [], [], 120)[0]
            assert ready, "no answer while the pipe stays open"
            answers.append(proc.stdout.readline().decode().rstrip("\n"))
        proc.stdin.close()
        assert proc.wait(timeout=60) == 0 and proc.stdout.read() == b""
    finally:
        proc.kill()
    translator = Translator.from_dir(trained_model_dir)
    assert answers == [
        h[0].text for h in translator.translate(["the dog runs", "a cat sleeps"], GREEDY)
    ]


def test_text_without_a_letter_is_given_back_as_it_is(translator):
    """Numbers, dates, prices and codes pass through untranslated, as lines, as sentences
    of a line, and as HTML text (a model would invent words for them)."""
    numbers = ["2024", "42 %", "12.05.2024", "€ 120,00", "#7 / 3:15", "1 2 3 4 5"]
    found = translator.translate([*numbers, "the dog runs"], GREEDY)
    assert [hyps[0].text for hyps in found[:-1]] == numbers
    assert all(hyps[0].confidence == 1.0 for hyps in found[:-1])
    assert found[-1][0].text and found[-1][0].text != "the dog runs"
    (line,) = translator.translate(["the dog runs\n2024\nthe cat sleeps"], GREEDY)
    assert "\n2024\n" in line[0].text
    html = SearchOptions(beam=1, format="html")
    (page,) = translator.translate(["<table><tr><td>2024</td><td>42</td></tr></table>"], html)
    assert "<td>2024</td><td>42</td>" in page[0].text


def test_a_document_s_number_only_cell_stays_a_number(translator):
    docx = pytest.importorskip("docx")
    import io

    from aiayn.text.documents import Limits

    document = docx.Document()
    document.add_paragraph("the dog runs")
    table = document.add_table(rows=1, cols=2)
    table.cell(0, 0).text, table.cell(0, 1).text = "the cat sleeps", "42"
    data = io.BytesIO()
    document.save(data)
    out = translator.translate_document(
        data.getvalue(), "docx", GREEDY, what="t.docx", limits=Limits()
    )
    cells = docx.Document(io.BytesIO(out)).tables[0].rows[0].cells
    assert cells[1].text == "42"
