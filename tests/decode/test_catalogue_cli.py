"""Localisation files through ``aiayn translate`` and ``Translator.translate_document``
with a model trained in the test: each unit's text translated as the model translates it
alone with the catalogue's placeholders protected, every placeholder back, the summary line
on standard error, low-confidence units marked for review."""

from __future__ import annotations

import json

import pytest

from aiayn.cli import main
from aiayn.search_options import SearchOptions
from aiayn.text.documents import read_document
from aiayn.text.documents.catalogue import KINDS
from aiayn.text.documents.messages import placeholders
from aiayn.translate.document_texts import document_options
from aiayn.translate.translator import Translator

from ..text.catalogues import FILES

pytest.importorskip("translate.storage.po", reason="the l10n extra is a dev dependency")


@pytest.fixture(scope="module")
def translator(trained_model_dir):
    return Translator.from_dir(trained_model_dir)


def _alone(translator, texts: list[str], options: SearchOptions) -> list[str]:
    options = document_options(options, "po")
    return [translator.translate([t], options)[0][0].text for t in texts]


def test_a_po_file_by_its_suffix(trained_model_dir, translator, tmp_path, capsys):
    source = tmp_path / "notes.pot"
    source.write_bytes(FILES["po"])
    out = tmp_path / "de.po"
    argv = ["translate", "--model", str(trained_model_dir), "-i", str(source), "-o", str(out)]
    assert main([*argv, "--beam", "2"]) == 0
    err = capsys.readouterr().err
    assert f"{source}: 3 units translated, 1 already translated (kept)" in err
    texts = read_document(FILES["po"], "po").texts
    expected = _alone(translator, texts, SearchOptions(beam=2))
    units = [u for u in KINDS["po"].parse(out.read_bytes()).units if not u.isheader()]
    assert units[0].target == expected[0]  # Open %s, its context kept
    assert units[0].getcontext() == "menu" and "%s" in units[0].target
    assert list(units[1].target.strings) == expected[1:3]
    for unit in units[:3]:
        assert placeholders(str(unit.source)) <= placeholders(str(unit.target)) or (
            unit.hasplural()
        )


def test_min_confidence_marks_units_for_review(trained_model_dir, tmp_path, capsys):
    source = tmp_path / "notes.xlf"
    source.write_bytes(FILES["xliff"])
    out = tmp_path / "notes.de.xlf"
    argv = ["translate", "--model", str(trained_model_dir), "-i", str(source), "-o", str(out)]
    assert main([*argv, "--beam", "1", "--min-confidence", "0.999"]) == 0
    assert "2 units translated (2 marked for review)" in capsys.readouterr().err
    assert out.read_text().count('state="needs-review-translation"') == 2


def test_retranslate_on_the_command_line(trained_model_dir, tmp_path, capsys, monkeypatch):
    """``-o -`` writes to standard output, as ``-`` does for most commands (no file named -)."""
    monkeypatch.chdir(tmp_path)
    source = tmp_path / "de.po"
    source.write_bytes(FILES["po"])
    argv = ["translate", "--model", str(trained_model_dir), "-i", str(source), "-o", "-"]
    assert main([*argv, "--beam", "1", "--retranslate"]) == 0
    printed = capsys.readouterr()
    assert "4 units translated" in printed.err
    assert 'msgstr "' in printed.out and not (tmp_path / "-").exists()


def test_json_through_the_python_api_keeps_keys_and_placeholders(translator):
    out = translator.translate_document(FILES["json"], "json", SearchOptions(beam=1), target="ru")
    values = json.loads(out)
    assert list(values) == ["menu", "notes", "version", "enabled"]
    assert "{{name}}" in values["menu"]["open"] and "$t(menu.open)" in values["notes"]["summary"]
    assert {"deleted_one", "deleted_few", "deleted_many", "deleted_other"} <= set(values["notes"])
    assert values["notes"]["summary"].startswith("{count, plural, one {")
