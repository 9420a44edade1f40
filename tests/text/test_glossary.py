"""Glossaries: read from TSV or pairs, matched as whole words ignoring case."""

import pytest

from aiayn.text.glossary import Glossary, GlossaryError, read_glossary, spell_as_glossary


def test_terms_are_matched_as_whole_words_ignoring_case_longest_first(tmp_path):
    path = tmp_path / "terms.tsv"
    path.write_text("# UI terms\nbutton\tSchaltfläche\n\nsave button\tSpeichern-Knopf\n")
    glossary = read_glossary(path)
    found = glossary.matches("Press the Save Button, then the button; buttons stay.")
    assert [(t.source, t.target) for t in found] == [
        ("save button", "Speichern-Knopf"),
        ("button", "Schaltfläche"),
    ]
    assert glossary.matches("buttons and unbuttoned") == []


def test_the_target_term_is_written_as_the_glossary_spells_it():
    glossary = Glossary.from_pairs({"button": "Schaltfläche"}.items())
    text = spell_as_glossary("drücken sie die schaltfläche .", glossary.terms)
    assert text == "drücken sie die Schaltfläche ."


@pytest.mark.parametrize(
    "content, message",
    [
        ("", "no terms"),
        ("# only a comment\n\n", "no terms"),
        ("button\n", "line 1: expected 'source term<TAB>target term', got 1 field"),
        ("a\tb\tc\n", "line 1: expected .*got 3 fields"),
        ("ok\tgut\n\tleer\n", "line 2: an empty source term"),
        ("ok\tgut\nok\tprima\n", "line 2: 'ok' again, with another target"),
    ],
)
def test_a_malformed_glossary_is_one_line_naming_file_and_line(tmp_path, content, message):
    path = tmp_path / "g.tsv"
    path.write_text(content)
    with pytest.raises(GlossaryError, match=message) as e:
        read_glossary(path)
    assert str(path) in str(e.value) and "\n" not in str(e.value)


def test_an_unreadable_glossary_is_one_line(tmp_path):
    with pytest.raises(GlossaryError, match="cannot read"):
        read_glossary(tmp_path / "missing.tsv")
    (tmp_path / "latin1.tsv").write_bytes("caf\xe9\tx\n".encode("latin-1"))
    with pytest.raises(GlossaryError, match="not UTF-8"):
        read_glossary(tmp_path / "latin1.tsv")


@pytest.mark.parametrize(
    "pairs, message",
    [([], "no terms"), (["ab"], "entry 1"), ([("a", 3)], "must be text"), ([("a", " ")], "empty")],
)
def test_bad_pairs_are_one_line(pairs, message):
    with pytest.raises(GlossaryError, match=message):
        Glossary.from_pairs(pairs, origin="request glossary")


def test_a_glossary_is_compiled_once_per_content_however_often_it_is_sent(monkeypatch):
    """A server's glossary travels to the decoding process with every batch's options (a
    pickled copy), and a request's glossary is rebuilt for every request: each content is
    compiled once in a process, found again by its digest."""
    import pickle

    from aiayn.text import glossary as module

    compiled = []

    def counting(terms):
        compiled.append(terms)
        return real(terms)

    real = module.compile_terms
    monkeypatch.setattr(module, "compile_terms", counting)
    monkeypatch.setattr(module, "_MATCHERS", type(module._MATCHERS)())
    server = Glossary.from_pairs([("button", "Schaltfläche"), ("save", "speichern")])
    for _ in range(3):  # three batches, each with a copy of the options
        copy = pickle.loads(pickle.dumps(server))
        assert [t.target for t in copy.matches("Save the button")] == ["speichern", "Schaltfläche"]
    for _ in range(2):  # the same request glossary twice
        asked = Glossary.from_pairs([["dog", "Hund"]])
        assert [t.target for t in asked.matches("a dog")] == ["Hund"]
    assert len(compiled) == 2
    other = Glossary.from_pairs([["dog", "Köter"]])  # other content: compiled anew
    assert [t.target for t in other.matches("a dog")] == ["Köter"]
    assert len(compiled) == 3 and other.digest != asked.digest
