"""Localisation files: an application's message catalogues, read and written by
translate-toolkit's storage classes (``aiayn[l10n]``), which keep what they do not change:
gettext PO and POT, XLIFF 1.2 and 2.0, JSON (nested keys, i18next's plural keys:
``i18next``; Flutter's ARB), Android's strings.xml and Java properties; YAML (Rails' and
plain) by ruamel.yaml's round trip (``yaml_catalogue``).

A ``Catalogue``'s ``texts`` are its units' source strings still to translate: each plural
form, and the inner texts of ICU plural and select arguments (``messages``), their selectors
kept. ``render`` writes each translation as its unit's target, in the target language's
plural forms (gettext's count from Babel's CLDR data; the key names i18next, Rails and
Android use from translate-toolkit's), and sets the file's target language. A unit whose
translation would not keep every placeholder of its source is left untranslated; one
translated with too little confidence is marked for review (PO ``fuzzy``, XLIFF
``needs-review-translation`` / ``initial``) or, in a format with no such mark, left in its
source language. Units that hold a translation already are kept unless ``retranslate``.
"""

from __future__ import annotations

import gettext
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from aiayn.text.documents.base import (
    DocumentError,
    Limits,
    counted,
    declares_entities,
    reading,
)
from aiayn.text.documents.i18next import with_plural_keys
from aiayn.text.documents.java_properties import as_properties, read_properties
from aiayn.text.documents.messages import (
    Message,
    MessageError,
    has_text,
    icu_message,
    is_icu,
    placeholders,
    protect_problem,
)
from aiayn.text.documents.yaml_catalogue import YamlStore

BARE_AMPERSAND = re.compile(r"&(?!(?:[A-Za-z][A-Za-z0-9]*|#\d+|#x[0-9A-Fa-f]+);)")
SHOWN_KEYS = 3  # the summary names this many of the units it left untranslated
# a localisation file's size at most, whatever the document limits allow: the largest
# catalogues of large projects (LibreOffice's, WordPress's) are a few MiB
MAX_CATALOGUE_BYTES = 32 << 20


@dataclass
class Entry:
    """A unit to translate: its key, its source's forms (one, or singular and plural) as
    messages, and where its texts start in the catalogue's ``texts``."""

    unit: Any
    key: str
    forms: list[Message]
    start: int = 0

    @property
    def size(self) -> int:
        return sum(len(m.texts) for m in self.forms)


@dataclass
class Tally:
    """What ``render`` did to a catalogue's units."""

    translated: int = 0
    kept: int = 0  # already translated
    review: int = 0
    untranslated: list[str] = field(default_factory=list)  # with the reason, per unit


@dataclass(frozen=True)
class Kind:
    """How one localisation format is read and written."""

    name: str
    label: str  # in messages: "not a readable {label}"
    parse: Callable[[bytes], Any]
    bilingual: bool  # units carry a target (PO, XLIFF); else the file is one language's
    xml: bool = False


class Catalogue:
    """A localisation file read for translation: ``texts``, and the file with their
    translations in place (``render``, once), with a ``summary`` line afterwards."""

    def __init__(
        self, kind: Kind, store: Any, source: bytes, *, what: str, limits: Limits, retranslate: bool
    ):
        self.kind, self._store, self._source, self._what = kind, store, source, what
        self.tally = Tally()
        self._entries: list[Entry] = []
        self._as_they_are: list[tuple[Any, list[str]]] = []  # plural units not translated
        self.texts: list[str] = []
        for unit in store.units:
            if _ignored(unit):
                continue
            if kind.bilingual and _has_target(unit) and not retranslate:
                self.tally.kept += 1
                continue
            self._add(unit)
        limits.check(what, len(self.texts), limits.max_segments, "texts to translate")

    def _add(self, unit: Any) -> None:
        key = _key(unit)
        sources = _sources(unit, self.kind)
        if len(sources) > 1 and not self.kind.bilingual:  # the target's forms, even if it
            self._as_they_are.append((unit, sources))  # is not translated
        if not any(has_text(s) for s in sources):
            return  # nothing to translate in it: a number, a code, a placeholder alone
        try:
            forms = [icu_message(s) if is_icu(s) else Message((s,)) for s in sources]
        except MessageError as e:
            self.tally.untranslated.append(f"{key} ({e})")
            return
        problem = next((p for m in forms for t in m.texts if (p := protect_problem(t))), None)
        if problem is not None:  # said of the file, not of the command line's --no-protect
            self.tally.untranslated.append(f"{key} ({problem.split(' (close it')[0]})")
            return
        entry = Entry(unit, key, forms, start=len(self.texts))
        self._entries.append(entry)
        self.texts += [t for m in forms for t in m.texts]

    def render(
        self,
        translations: Sequence[str],
        *,
        review: Sequence[bool] = (),
        target: str | None = None,
    ) -> bytes:
        """The file with each unit's translation (``translations[i]`` for ``texts[i]``;
        ``review[i]``: that translation's confidence is too low) in ``target``, a
        language's code (None: the language the file names, its plural forms as the
        source's where it names none)."""
        if len(translations) != len(self.texts):
            raise ValueError(f"{len(translations)} translations for {len(self.texts)} texts")
        review = list(review) or [False] * len(self.texts)
        plural = _plural_forms(self._store, self.kind, _locale(target))
        for unit, sources in self._as_they_are:  # a one-language file is the target's
            self._write(unit, plural.spread(sources), False)
        for entry in self._entries:
            found = translations[entry.start : entry.start + entry.size]
            unsure = any(review[entry.start : entry.start + entry.size])
            self._put(entry, found, unsure, plural)
        self._entries = []
        out = bytes(self._store)
        if self.kind.name == "json":
            return with_plural_keys(out, plural.tags, self._source)
        return as_properties(out, self._source) if self.kind.name == "properties" else out

    def _put(self, entry: Entry, found: Sequence[str], unsure: bool, plural: PluralForms) -> None:
        sources = [t for m in entry.forms for t in m.texts]
        lost = next((s for s, t in zip(sources, found, strict=True) if _loses(s, t)), None)
        if lost is not None:
            self.tally.untranslated.append(f"{entry.key} (a placeholder of {lost!r} was lost)")
        elif unsure and not self.kind.bilingual:  # no review mark: kept in the source language
            self.tally.untranslated.append(f"{entry.key} (confidence too low)")
        else:
            try:
                self._write(entry.unit, plural.spread(_rendered(entry.forms, found)), unsure)
            except DocumentError as e:  # a translation its format cannot hold (XML)
                self.tally.untranslated.append(f"{entry.key} ({str(e).split(': ', 1)[-1]})")
                return
            self.tally.translated += 1
            self.tally.review += unsure
            return
        if not self.kind.bilingual:  # the file is the target's: its source, in its forms
            self._write(entry.unit, plural.spread(_rendered(entry.forms, sources)), False)

    def _write(self, unit: Any, forms: list[str], unsure: bool) -> None:
        with reading(self._what, self.kind.label):
            _set_target(unit, self.kind, forms, unsure)

    @property
    def summary(self) -> str:
        """One line: units translated (and marked for review), kept, left untranslated."""
        t = self.tally
        line = f"{self._what}: {counted(t.translated, 'unit')} translated"
        line += f" ({t.review} marked for review)" if t.review else ""
        line += f", {t.kept} already translated (kept)" if t.kept else ""
        if t.untranslated:
            shown = "; ".join(t.untranslated[:SHOWN_KEYS])
            more = len(t.untranslated) - SHOWN_KEYS
            line += f", {len(t.untranslated)} left untranslated: {shown}"
            line += f"; and {more} more" if more > 0 else ""
        return line


def _rendered(forms: list[Message], texts: Sequence[str]) -> list[str]:
    """Each form with its texts replaced, in order, by ``texts``."""
    out, at = [], 0
    for message in forms:
        out.append(message.render(texts[at : at + len(message.texts)]))
        at += len(message.texts)
    return out


def _loses(source: str, translation: str) -> bool:
    """Whether ``translation`` does not hold exactly ``source``'s placeholders."""
    return placeholders(source) != placeholders(translation)


@dataclass(frozen=True)
class PluralForms:
    """How many plural forms a target takes and which of them the singular fills: each
    other form takes the source's plural (its last form)."""

    count: int | None  # None: as many as the source has
    singular: frozenset[int] = frozenset({0})
    tags: tuple[str, ...] = ()  # their CLDR categories, where the format names forms so

    def spread(self, forms: list[str]) -> list[str]:
        if len(forms) == 1 or self.count is None:
            return forms
        return [forms[0] if i in self.singular else forms[-1] for i in range(self.count)]


def _plural_forms(store: Any, kind: Kind, locale: str | None) -> PluralForms:
    """The target's plural forms, and ``store`` told its target language."""
    if kind.name == "po":
        return _po_plurals(store, locale)
    if locale is None:
        return PluralForms(None)
    store.settargetlanguage(locale.replace("_", "-") if kind.name == "xliff" else locale)
    _name_locale(store, locale)
    tags = plural_tags(locale)
    if tags is None:
        return PluralForms(None)
    if hasattr(store, "set_plural_tags"):  # aiayn's YAML store
        store.set_plural_tags(tags)
    else:  # translate-toolkit's stores ask their own
        store.get_plural_tags = lambda target=None: tags
    singular = frozenset(i for i, tag in enumerate(tags) if tag == "one")
    return PluralForms(len(tags), singular, tuple(tags))


def plural_tags(locale: str) -> list[str] | None:
    """A language's plural categories, as translate-toolkit names its forms (gettext's
    integer categories, as Weblate writes them) and CLDR's "other" (fractions), which
    i18next and Rails ask for; a region or script falls back to its language (ru_RU: ru).
    None for a language the table does not know."""
    from translate.lang.data import plural_tags as table

    found = table.get(locale) or table.get(locale.split("_")[0])
    if found is None:
        return None
    return list(found) if "other" in found else [*found, "other"]


def _po_plurals(store: Any, locale: str | None) -> PluralForms:
    """A PO file's plural forms: its header's, else the target's by Babel's CLDR data
    (written into the header, with the language)."""
    count, rule = store.getheaderplural()
    if locale is not None:
        named = (store.gettargetlanguage() or "").replace("-", "_").split("_")[0]
        if named != locale.split("_")[0]:  # the header's rule is another language's
            count = rule = None
        store.updateheader(add=True, Language=locale)
        if count is None or rule is None:
            from babel.core import UnknownLocaleError
            from babel.messages.plurals import get_plural

            try:
                found = get_plural(locale)
            except (UnknownLocaleError, ValueError):  # a code CLDR does not know
                return PluralForms(None)
            count, rule = found.num_plurals, found.plural_expr
            store.updateheaderplural(count, rule)
    if count is None or rule is None:
        return PluralForms(None)
    count = int(count)
    singular = gettext.c2py(rule)(1) if count > 1 else -1
    return PluralForms(count, frozenset({singular}))


def _name_locale(store: Any, locale: str) -> None:
    """A Flutter ARB file's ``@@locale``: the target language (gen-l10n refuses a file
    whose ``@@locale`` and name disagree)."""
    for unit in store.units:
        metadata = getattr(unit, "metadata", None)
        if unit.getid() == "@" and isinstance(metadata, dict) and "@@locale" in metadata:
            metadata["@@locale"] = locale


def _locale(target: str | None) -> str | None:
    """A language code as translate-toolkit and Babel spell it: pt-BR -> pt_BR."""
    return target.replace("-", "_") if target else None


def _ignored(unit: Any) -> bool:
    """A unit with nothing to translate: a header, an obsolete or blank unit, a value that
    is no text, one marked not translatable."""
    if unit.isheader() or unit.isblank() or getattr(unit, "isobsolete", lambda: False)():
        return True
    if not isinstance(unit.source, str):  # a JSON number or boolean (multistring is a str)
        return True
    element = getattr(unit, "xmlelement", None)
    if element is None:
        return False
    if element.get("translatable") == "false":  # Android
        return True
    holders = (element, element.getparent()) if element.getparent() is not None else (element,)
    return any(e.get("translate") == "no" for e in holders)  # XLIFF: the unit's or segment's


def _has_target(unit: Any) -> bool:
    target = unit.target
    strings = getattr(target, "strings", [target])
    return any(s for s in strings)


def _key(unit: Any) -> str:
    key = unit.getid() or unit.getcontext() or ""
    return str(key).replace("\x04", " / ").removeprefix(".")  # JSON's ids start with "."


def _sources(unit: Any, kind: Kind) -> list[str]:
    """A unit's source forms as text: its plural forms, or its one string (an XLIFF
    source with its inline markup as XML)."""
    if kind.name == "xliff":
        return [_inner_xml(unit.source_dom)]
    strings = getattr(unit.source, "strings", None)
    if strings and len(strings) > 1:
        return [str(s) for s in strings]
    return [str(unit.source)]


def _set_target(unit: Any, kind: Kind, forms: list[str], unsure: bool) -> None:
    """Write a unit's target forms and its state."""
    if kind.name == "xliff":
        _set_xliff_target(unit, forms[0], unsure)
        return
    if len(forms) > 1:
        from translate.misc.multistring import multistring

        unit.target = multistring(forms)
    else:
        unit.target = forms[0]
    if kind.name == "po":
        unit.markfuzzy(unsure)


def _set_xliff_target(unit: Any, text: str, unsure: bool) -> None:
    """An XLIFF unit's target: ``text`` read as the XML content of its ``<target>`` (the
    inline markup of its source kept), in the state of its confidence."""
    from lxml import etree

    namespace = etree.QName(unit.source_dom).namespace
    parser = etree.XMLParser(resolve_entities=False, no_network=True, huge_tree=False)
    text = BARE_AMPERSAND.sub("&amp;", text)  # "F&E": a translation's own ampersand
    holder = etree.fromstring(f'<t xmlns="{namespace}">{text}</t>', parser)  # before writing
    unit.target = "-"  # makes the element, in its place, in the state "translated"
    target = unit.getlanguageNode(lang=None, index=1)
    target.text = holder.text
    for child in list(target):
        target.remove(child)
    for child in holder:
        target.append(child)
    if hasattr(unit, "S_REVIEWED"):  # XLIFF 2.0: a translation's state, or initial
        unit.markfuzzy(unsure)
        return
    unit.xmlelement.attrib.pop("approved", None)  # a machine's translation is not approved
    if unsure:
        unit.set_state_n(unit.S_NEEDS_REVIEW)  # XLIFF 1.2: needs-review-translation


def _inner_xml(element: Any) -> str:
    """What ``element`` holds, as XML text (its text, child elements and their tails)."""
    from lxml import etree

    whole = etree.tostring(element, encoding=str, with_tail=False)
    if whole.endswith("/>"):
        return ""
    return whole[whole.index(">") + 1 : whole.rindex("</")]


def read_catalogue(
    data: bytes, what: str, limits: Limits, kind: Kind, *, retranslate: bool = False
) -> Catalogue:
    """``data`` read as a ``kind`` file.

    Raises:
        DocumentError: broken, hostile (an XML entity declaration, a YAML alias bomb), or
            of another format.
        DocumentTooLarge: more texts than ``limits``.
    """
    limits.check(what, len(data), min(limits.max_bytes, MAX_CATALOGUE_BYTES), "bytes")
    if kind.name in ("json", "arb") and data.lstrip(b"\xef\xbb\xbf \t\r\n")[:1] not in (b"{", b"["):
        raise DocumentError(f"{what}: not a readable {kind.label} (not an object of strings)")
    if kind.xml and declares_entities(data):
        raise DocumentError(f"{what}: declares XML entities (refused: entity expansion)")
    with reading(what, kind.label):
        store = kind.parse(data)
    return Catalogue(kind, store, data, what=what, limits=limits, retranslate=retranslate)


def _parsed(cls_path: str) -> Callable[[bytes], Any]:
    """A parser: ``data`` into the translate-toolkit store ``module:Class``."""

    def parse(data: bytes) -> Any:
        import importlib

        module, name = cls_path.split(":")
        store = getattr(importlib.import_module(f"translate.storage.{module}"), name)()
        store.parse(data)
        return store

    return parse


def _xliff(data: bytes) -> Any:
    version_2 = b"urn:oasis:names:tc:xliff:document:2." in data[:4096]
    return _parsed("xliff2:Xliff2File" if version_2 else "xliff:xlifffile")(data)


KINDS = {
    k.name: k
    for k in (
        Kind("po", "gettext PO file", _parsed("po:pofile"), bilingual=True),
        Kind("xliff", "XLIFF file", _xliff, bilingual=True, xml=True),
        Kind("json", "JSON file", _parsed("jsonl10n:JsonNestedFile"), bilingual=False),
        Kind("arb", "Flutter ARB file", _parsed("jsonl10n:ARBJsonFile"), bilingual=False),
        Kind("yaml", "YAML file", YamlStore, bilingual=False),
        Kind(
            "android",
            "Android string resource",
            _parsed("aresource:AndroidResourceFile"),
            bilingual=False,
            xml=True,
        ),
        Kind(
            "properties",
            "Java properties file",
            read_properties,
            bilingual=False,
        ),
    )
}
