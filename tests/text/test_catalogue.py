"""Localisation files round-trip: each format's file, translated by a stand-in that keeps
placeholders, opens in its own library with every unit's key, context, notes and order kept,
its source untouched, its targets translated in the target language's plural forms, its
low-confidence units marked for review, and a unit that would lose a placeholder left
untranslated. PO passes ``msgfmt --check`` where gettext is installed."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import time

import pytest

from aiayn.text.documents import (
    DocumentError,
    DocumentTooLarge,
    Limits,
    Translated,
    read_document,
    translate_document,
)
from aiayn.text.documents.catalogue import KINDS, MAX_CATALOGUE_BYTES
from aiayn.text.documents.messages import icu_message, placeholders

from .catalogues import FILES, format_of, shout_words

pytest.importorskip("translate.storage.po", reason="the l10n extra is a dev dependency")


def _units(data: bytes, name: str):
    """(key, context, notes, source) of every unit, in order, and each unit's target (a
    Java properties file's value is its source to translate-toolkit)."""
    store = KINDS[format_of(name)].parse(data)
    units = [u for u in store.units if not u.isheader()]
    shape = [(u.getid(), u.getcontext(), u.getnotes(), str(u.source)) for u in units]
    return shape, [u.target or u.source for u in units]


@pytest.mark.parametrize("name", FILES)
def test_a_round_trip_changes_only_the_targets(name):
    source = FILES[name]
    out = translate_document(source, format_of(name), shout_words, target="de")
    before, _ = _units(source, name)
    after, targets = _units(out, name)
    if format_of(name) in ("po", "xliff"):
        assert after == before
    else:  # one language's file: its values are the translations
        assert [key for key, *_ in after] == [key for key, *_ in before]
    assert any(re.search(r"\b[A-Z]{4,}\b", str(t)) for t in targets)  # OPEN, HELLO


@pytest.mark.parametrize("name", FILES)
def test_every_placeholder_comes_back_byte_for_byte(name):
    """Each translated unit holds exactly its source's placeholders, in every form."""
    source = FILES[name]
    out = translate_document(source, format_of(name), shout_words, target="ru")
    store = KINDS[format_of(name)].parse(out)
    checked = 0
    for unit in store.units:
        target = unit.target or unit.source
        if unit.isheader() or not isinstance(target, str) or not any(c.isupper() for c in target):
            continue
        sources = [str(s) for s in getattr(unit.source, "strings", [unit.source])]
        for form in getattr(target, "strings", [target]):
            assert any(placeholders(form) == placeholders(s) for s in sources), (form, sources)
            checked += 1
    assert checked >= 2


@pytest.mark.parametrize(("target", "forms"), [("de", 2), ("ru", 3), ("ko", 1), ("ar", 6)])
def test_po_plural_forms_are_the_target_language_s(target, forms):
    out = translate_document(FILES["po"], "po", shout_words, target=target).decode()
    assert f'"Language: {target}\\n"' in out and f"nplurals={forms};" in out
    plural = out[out.index('msgid "One note was deleted."') :].split("\n\n")[0]
    assert plural.count("msgstr[") == forms
    if forms > 1:
        assert "ONE NOTE WAS DELETED." in plural  # the form a count of 1 takes
    assert "%(count)d NOTES WERE DELETED." in plural


@pytest.mark.skipif(shutil.which("msgfmt") is None, reason="gettext's msgfmt is not installed")
@pytest.mark.parametrize("target", ["de", "ru", "ja"])
def test_a_translated_po_passes_msgfmt_check(tmp_path, target):
    path = tmp_path / f"{target}.po"
    path.write_bytes(translate_document(FILES["po"], "po", shout_words, target=target))
    run = subprocess.run(
        ["msgfmt", "--check", "-o", "/dev/null", str(path)], capture_output=True, text=True
    )
    assert run.returncode == 0, run.stderr


def test_po_keeps_context_comments_obsolete_units_and_translations():
    out = translate_document(FILES["po"], "po", shout_words, target="de").decode()
    assert 'msgctxt "menu"\nmsgid "Open %s"\nmsgstr "OPEN %s"' in out
    assert "#. The menu entry that opens a note\n#: notes/menu.py:12" in out
    assert 'msgid "Saved"\nmsgstr "Gespeichert"' in out  # translated already: kept
    assert '#~ msgid "Old string"' in out
    assert "#, fuzzy, python-format" in out  # the low-confidence unit, marked for review
    assert 'msgstr "HELLO {name}, YOU HAVE <b>NEW</b> MESSAGES."' in out


def test_retranslate_redoes_units_that_hold_a_translation():
    kept = read_document(FILES["po"], "po")
    redone = read_document(FILES["po"], "po", retranslate=True)
    assert "Saved" not in kept.texts and "Saved" in redone.texts
    out = translate_document(FILES["po"], "po", shout_words, retranslate=True).decode()
    assert 'msgid "Saved"\nmsgstr "SAVED"' in out


def test_a_summary_line_counts_translated_kept_review_and_untranslated():
    lines: list[str] = []
    translate_document(FILES["po"], "po", shout_words, what="de.po", report=lines.append)
    assert lines == ["de.po: 3 units translated (1 marked for review), 1 already translated (kept)"]
    lines.clear()
    translate_document(FILES["properties"], "properties", shout_words, report=lines.append)
    assert lines[0].startswith("document: 2 units translated, 1 left untranslated: notes.deleted")


def test_a_document_s_summary_names_the_texts_kept_in_their_source():
    def unsure_of_numbers(texts):
        return [Translated(t.upper(), review="42" in t) for t in texts]

    from .documents import SRT

    lines: list[str] = []
    translate_document(SRT.encode(), "srt", unsure_of_numbers, what="a.srt", report=lines.append)
    assert lines == ["a.srt: 2 texts translated"]
    srt = SRT.replace("the 3 friends", "room 42")
    out = translate_document(srt.encode(), "srt", unsure_of_numbers, report=lines.append)
    assert "<b>Hello</b> to room 42!" in out.decode()  # the whole cue, as it was
    assert lines[1].startswith("document: 1 text translated, 1 kept in their source")


def test_xliff_keeps_inline_markup_and_marks_states():
    def unsure_greeting(texts: list[str]) -> list[Translated]:
        return [Translated(t.text, "HELLO" in t.text) for t in shout_words(texts)]

    one = translate_document(FILES["xliff"], "xliff", unsure_greeting, target="fr").decode()
    assert 'target-language="fr"' in one
    assert '<target state="translated">OPEN <g id="1">%s</g> NOW</target>' in one
    assert '<target state="needs-review-translation">HELLO {name} &amp; WELCOME</target>' in one
    assert '<target state="translated">Gespeichert</target>' in one
    two = translate_document(FILES["xliff-2"], "xliff", unsure_greeting, target="fr").decode()
    assert 'trgLang="fr"' in two and '<target>OPEN <pc id="1">{0}</pc> NOW</target>' in two
    assert two.count('state="initial"') == 1 and two.count('state="translated"') == 1


def test_i18next_json_gets_the_target_s_plural_keys_and_keeps_other_values():
    def sure(texts):
        return [t.text for t in shout_words(texts)]

    out = json.loads(translate_document(FILES["json"], "json", sure, target="ru"))
    notes = out["notes"]
    assert [k for k in notes if k.startswith("deleted_")] == [
        "deleted_one",
        "deleted_other",
        "deleted_few",  # the target's categories, after the source's keys
        "deleted_many",
    ]
    assert notes["deleted_one"] == "ONE NOTE WAS DELETED"
    assert notes["deleted_few"] == notes["deleted_other"] == "{{count}} NOTES WERE DELETED"
    assert notes["summary"] == "{count, plural, one {# NOTE} other {# NOTES}} IN $t(menu.open)"
    assert out["version"] == 3 and out["enabled"] is True


def test_a_low_confidence_unit_of_a_one_language_file_stays_in_its_source():
    out = json.loads(translate_document(FILES["json"], "json", shout_words, target="de"))
    assert out["notes"]["deleted_one"] == "One note was deleted"
    assert out["menu"]["close"] == "CLOSE"


def test_rails_yaml_is_rooted_at_the_target_language():
    out = translate_document(
        FILES["yaml"], "yaml", lambda t: [x.upper() for x in t], target="pt-BR"
    )
    assert out.decode().startswith("pt-BR:\n") and "OPEN %{NAME}" not in out.decode()


def test_android_keeps_untranslatable_strings_markup_and_escapes():
    out = translate_document(FILES["android"], "android", shout_words, target="de").decode()
    assert '<string name="app_name" translatable="false">Notes</string>' in out
    assert '<string name="open">OPEN <b>%1$s</b> NOW</string>' in out
    assert "HELLO %1$s, IT\\'S &lt;new&gt;" in out
    assert "<!-- The menu entry -->" in out


def test_arb_names_its_locale_and_translates_inside_icu():
    out = json.loads(translate_document(FILES["arb"], "arb", shout_words, target="de"))
    assert out["@@locale"] == "de" and out["@openNote"]["description"] == "The menu entry"
    assert out["notesCount"] == "{count, plural, =0{NO NOTES} one{ONE NOTE} other{{count} NOTES}}"


def test_a_translation_that_loses_a_placeholder_leaves_its_unit_untranslated():
    def careless(texts):
        return [t.replace("%s", "").replace("{name}", "{nom}") for t in texts]

    lines: list[str] = []
    out = translate_document(FILES["po"], "po", careless, target="de", report=lines.append)
    assert 'msgid "Open %s"\nmsgstr ""' in out.decode()
    assert "left untranslated: menu / Open %s (a placeholder of 'Open %s' was lost)" in lines[0]


def test_icu_messages_keep_their_selectors():
    gender = "{g, select, female {She} other {They}}"
    count = "{n, plural, offset:1 =0 {nothing} other {# files}}"
    message = icu_message(f"{gender} sent {count}")
    assert message.texts == ["She", "They", "sent", "nothing", "# files"]
    out = message.render(["Sie", "Sie", "schickte", "nichts", "# Dateien"])
    gender, count = gender.replace("She", "Sie").replace("They", "Sie"), count
    count = count.replace("nothing", "nichts").replace("files", "Dateien")
    assert out == f"{gender} schickte {count}"


@pytest.mark.parametrize(
    ("name", "data", "message"),
    [
        ("po", b'msgid "a"\nmsgstr "b', "not a readable gettext PO file"),
        ("xliff", b"<xliff><file>", "not a readable XLIFF file"),
        ("json", b'{"a": ', "not a readable JSON file"),
        ("json", b'"just a string"', "not a readable JSON file .not an object of strings"),
        ("yaml", b"a: [b\n", "not a readable YAML file"),
        ("android", b"<resources><string>", "not a readable Android string resource"),
        ("po", b"\xff\xfe\x00garbage", "not a readable gettext PO file"),
    ],
)
def test_a_broken_file_is_one_line(name, data, message):
    with pytest.raises(DocumentError, match=message) as raised:
        read_document(data, name, what="f")
    assert "\n" not in str(raised.value)


def _alias_bomb() -> bytes:
    """YAML's billion laughs: 11 levels of ten aliases each."""
    lines, previous = ['a: &a ["lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol"]'], "a"
    for name in "bcdefghijkl":
        lines.append(f"{name}: &{name} [{', '.join([f'*{previous}'] * 10)}]")
        previous = name
    return "\n".join(lines).encode()


LAUGHS = b"""<?xml version="1.0"?>
<!DOCTYPE x [<!ENTITY a "aaaaaaaaaa"><!ENTITY b "&a;&a;&a;&a;&a;&a;&a;&a;&a;&a;">]>"""
XLIFF_BODY = b"""<xliff version="1.2" xmlns="urn:oasis:names:tc:xliff:document:1.2"><file
original="a" source-language="en" datatype="plaintext"><body><trans-unit id="u"><source>%s
</source></trans-unit></body></file></xliff>"""


@pytest.mark.parametrize(
    ("name", "data", "message"),
    [
        ("xliff", LAUGHS + XLIFF_BODY % b"&b;", "declares XML entities"),
        (
            "android",
            b'<?xml version="1.0"?><!DOCTYPE r [<!ENTITY x SYSTEM "file:///etc/passwd">]>'
            b'<resources><string name="a">&x;</string></resources>',
            "declares XML entities",
        ),
        ("json", b"[" * 100_000 + b"]" * 100_000, "not a readable JSON file"),
        ("xliff", XLIFF_BODY % (b"<g>" * 5000 + b"x" + b"</g>" * 5000), "not a readable XLIFF"),
    ],
)
def test_a_hostile_file_is_refused_in_one_line_in_bounded_time(name, data, message):
    start = time.perf_counter()
    with pytest.raises(DocumentError, match=message) as raised:
        read_document(data, name, what="f")
    assert "\n" not in str(raised.value) and time.perf_counter() - start < 30


def test_a_file_over_the_limits_is_refused_before_it_is_parsed():
    huge = b'msgid "a"\nmsgstr ""\n' * (MAX_CATALOGUE_BYTES // 20 + 1)
    with pytest.raises(DocumentTooLarge, match="bytes, more than the limit"):
        read_document(huge, "po", limits=Limits(max_bytes=1 << 30))
    many = b"".join(b'msgid "note %d"\nmsgstr ""\n\n' % i for i in range(60))
    with pytest.raises(DocumentTooLarge, match="60 texts to translate"):
        read_document(many, "po", limits=Limits(max_segments=50))


def test_ten_thousand_units_keep_their_order_and_placeholders():
    po = "".join(
        f'msgctxt "c{i}"\nmsgid "Note {{name}} number %d was saved ({i})"\nmsgstr ""\n\n'
        for i in range(10_000)
    ).encode()
    document = read_document(po, "po")
    assert len(document.texts) == 10_000
    out = translate_document(po, "po", lambda t: [s.replace("Note", "Notiz") for s in t])
    store = KINDS["po"].parse(out)
    units = [u for u in store.units if not u.isheader()]
    assert [u.getcontext() for u in units] == [f"c{i}" for i in range(10_000)]
    assert all(u.target.startswith("Notiz {name} number %d was saved") for u in units)


def test_plural_units_left_as_they_are_take_the_target_s_forms_too():
    """A one-language file is the target's: a plural it cannot translate (no letter, an
    unbalanced brace) keeps its source text, in the target's plural keys."""
    source = b'{"n_one": "%d", "n_other": "%d", "b_one": "one {", "b_other": "many {"}'
    out = json.loads(translate_document(source, "json", shout_words, target="ru"))
    assert out == {
        **{f"n_{k}": "%d" for k in ("one", "few", "many", "other")},
        **{f"b_{k}": "one {" if k == "one" else "many {" for k in ("one", "few", "many", "other")},
    }


def test_i18next_keys_that_only_look_like_plurals_stay_as_they_are():
    source = (
        b'{\n  "step_one": "Choose a plan",\n  "step_two": "Pay",\n  "step_three": "Confirm",\n'
        b'  "x_zero": "No items",\n  "x_one": "One item",\n  "x_other": "{{count}} items",\n'
        b'  "p_ordinal_one": "{{count}}st",\n  "p_ordinal_other": "{{count}}th"\n}\n'
    )
    out = translate_document(source, "json", shout_words, target="ru")
    values = json.loads(out)
    assert list(values)[:3] == ["step_one", "step_two", "step_three"]
    assert values["step_two"] == "PAY" and values["x_zero"] == "NO ITEMS"
    assert {"x_few", "x_many"} <= set(values) and "p_ordinal_few" not in values
    assert out.startswith(b'{\n  "step_one"') and out.endswith(b"}\n")  # laid out as it was


@pytest.mark.parametrize(("target", "keys"), [("ru-RU", 4), ("ar-EG", 6), ("ja-JP", 2)])
def test_a_region_takes_its_language_s_plural_forms(target, keys):
    source = b'{"x_one": "One file", "x_other": "{{count}} files"}'
    out = json.loads(translate_document(source, "json", shout_words, target=target))
    assert len(out) == keys


def test_what_has_nothing_to_translate_is_not_sent_and_repeats_are_sent_once():
    sent: list[list[str]] = []

    def record(texts):
        sent.append(texts)
        return shout_words(texts)

    source = b'{"a": "Hello", "b": "Hello", "c": "%s", "d": "{{count}}", "e": "https://x.org/a"}'
    out = json.loads(translate_document(source, "json", record, target="de"))
    assert sent == [["Hello"]] and out == {**json.loads(source), "a": "HELLO", "b": "HELLO"}


def test_an_xliff_translation_with_a_bare_ampersand_is_escaped():
    def ampersand(texts):
        return [t.replace("Hello", "F&E") for t in texts]  # its placeholders kept

    out = translate_document(FILES["xliff"], "xliff", ampersand, target="de").decode()
    assert '<target state="translated">F&amp;E {name} &amp; welcome</target>' in out


def test_units_marked_not_to_translate_are_kept():
    xliff = FILES["xliff"].replace(
        b'<trans-unit id="greet">', b'<trans-unit id="greet" translate="no">'
    )
    assert "Hello {name} &amp; welcome" not in read_document(xliff, "xliff").texts
    android = b"""<resources>
<string name="a">Get it on <xliff:g id="s">Google Play</xliff:g></string>
<string name="r">@string/app_name</string></resources>"""
    android = android.replace(
        b"<resources>", b'<resources xmlns:xliff="urn:oasis:names:tc:xliff:document:1.2">'
    )
    out = translate_document(android, "android", shout_words, target="de").decode()
    assert 'GET IT ON <xliff:g id="s">Google Play</xliff:g>' in out
    assert '<string name="r">@string/app_name</string>' in out


def test_a_po_header_s_plural_rule_of_another_language_is_replaced():
    po = FILES["po"].replace(
        b'"Content-Transfer-Encoding: 8bit\\n"\n',
        b'"Content-Transfer-Encoding: 8bit\\n"\n"Language: en\\n"\n'
        b'"Plural-Forms: nplurals=2; plural=(n != 1);\\n"\n',
    )
    out = translate_document(po, "po", shout_words, target="ru").decode()
    assert "nplurals=3;" in out and "Language: ru" in out


def test_a_yaml_alias_bomb_is_read_once_and_written_with_its_aliases():
    """YAML's billion laughs: each aliased list is walked once, in bounded time, and the
    file comes back with its anchors and aliases."""
    start = time.perf_counter()
    document = read_document(_alias_bomb(), "yaml")
    out = translate_document(_alias_bomb(), "yaml", shout_words, target="de").decode()
    assert document.texts == ["lol"] * 8 and time.perf_counter() - start < 10
    assert out.count("LOL") == 8 and "*k" in out and len(out) < 2 * len(_alias_bomb())


def test_yaml_keeps_values_that_are_no_text_and_merged_keys():
    source = b"""en:
  number:
    precision: 3
    significant: false
    ratio: 1.5
    unit: "%u%n"
  order: [:year, :month]
  defaults: &defaults
    title: Hello %{name}
  page:
    <<: *defaults
  inbox:
    zero: No messages
    one: One message
    other: "%{count} messages"
"""
    out = translate_document(source, "yaml", shout_words, target="ru").decode()
    assert out.startswith("ru:\n  number:\n    precision: 3\n    significant: false\n")
    assert '    ratio: 1.5\n    unit: "%u%n"\n  order: [:year, :month]' in out
    assert "  page:\n    <<: *defaults\n  inbox:\n    zero: NO MESSAGES\n" in out
    assert '    few: "%{count} MESSAGES"' in out


def test_java_properties_keep_their_encoding():
    """An ISO-8859-1 or escaped ASCII file comes back as ASCII with Java's escapes (what
    Properties.load reads); a UTF-8 one as UTF-8."""

    def cafe(texts):
        return [t.replace("Hello", "Café") for t in texts]

    latin = "greet=Hello {0}\nname=Zoë\n".encode("latin-1")
    assert (
        translate_document(latin, "properties", cafe) == b"greet=Caf\\u00e9 {0}\nname=Zo\\u00eb\n"
    )
    escaped = b"greet=Hello {0}\nname=Zo\\u00eb\n"
    assert (
        translate_document(escaped, "properties", cafe) == b"greet=Caf\\u00e9 {0}\nname=Zo\\u00eb\n"
    )
    utf8 = "greet=Hello {0}\nname=Zoë\n".encode()
    assert translate_document(utf8, "properties", cafe).decode() == "greet=Café {0}\nname=Zoë\n"
