"""One small application's strings in every localisation format, as its developers' tools
write them, and a stand-in translator that keeps every placeholder."""

from __future__ import annotations

import re

from aiayn.text.documents import Translated
from aiayn.text.documents.messages import placeholders

PO = r"""# Notes app.
msgid ""
msgstr ""
"Project-Id-Version: notes 1.0\n"
"Content-Type: text/plain; charset=UTF-8\n"
"Content-Transfer-Encoding: 8bit\n"

#. The menu entry that opens a note
#: notes/menu.py:12
msgctxt "menu"
msgid "Open %s"
msgstr ""

#: notes/list.py:40
#, python-format
msgid "One note was deleted."
msgid_plural "%(count)d notes were deleted."
msgstr[0] ""
msgstr[1] ""

#: notes/list.py:52
msgid "Hello {name}, you have <b>new</b> messages."
msgstr ""

msgid "Saved"
msgstr "Gespeichert"

#~ msgid "Old string"
#~ msgstr "Alte Zeichenkette"
"""

XLIFF_1 = b"""<?xml version="1.0" encoding="UTF-8"?>
<xliff version="1.2" xmlns="urn:oasis:names:tc:xliff:document:1.2">
  <file original="notes.ts" source-language="en" datatype="plaintext">
    <body>
      <trans-unit id="open">
        <source>Open <g id="1">%s</g> now</source>
        <note>The menu entry</note>
      </trans-unit>
      <trans-unit id="greet">
        <source>Hello {name} &amp; welcome</source>
      </trans-unit>
      <trans-unit id="saved">
        <source>Saved</source>
        <target state="translated">Gespeichert</target>
      </trans-unit>
    </body>
  </file>
</xliff>
"""

XLIFF_2 = b"""<?xml version="1.0" encoding="UTF-8"?>
<xliff xmlns="urn:oasis:names:tc:xliff:document:2.0" version="2.0" srcLang="en">
  <file id="notes">
    <unit id="open">
      <notes><note>The menu entry</note></notes>
      <segment><source>Open <pc id="1">{0}</pc> now</source></segment>
    </unit>
    <unit id="greet">
      <segment><source>Hello {{name}}, welcome back</source></segment>
    </unit>
  </file>
</xliff>
"""

JSON = b"""{
  "menu": {"open": "Open {{name}}", "close": "Close"},
  "notes": {
    "deleted_one": "One note was deleted",
    "deleted_other": "{{count}} notes were deleted",
    "summary": "{count, plural, one {# note} other {# notes}} in $t(menu.open)"
  },
  "version": 3,
  "enabled": true
}
"""

ARB = b"""{
  "@@locale": "en",
  "openNote": "Open {name}",
  "@openNote": {"description": "The menu entry", "placeholders": {"name": {}}},
  "notesCount": "{count, plural, =0{No notes} one{One note} other{{count} notes}}"
}
"""

RAILS = b"""en:
  menu:
    open: "Open %{name}"
    close: Close
  notes:
    deleted:
      one: One note was deleted
      other: "%{count} notes were deleted"
"""

ANDROID = b"""<?xml version="1.0" encoding="utf-8"?>
<resources>
    <!-- The menu entry -->
    <string name="open">Open <b>%1$s</b> now</string>
    <string name="app_name" translatable="false">Notes</string>
    <plurals name="deleted">
        <item quantity="one">%d note was deleted</item>
        <item quantity="other">%d notes were deleted</item>
    </plurals>
    <string name="greet">Hello %1$s, it\\'s &lt;new&gt;</string>
</resources>
"""

PROPERTIES = b"""# Notes app
menu.open=Open {0}
menu.close = Close
notes.deleted={0,choice,0#no notes|1#one note|1<{0} notes}
"""

FILES = {
    "po": PO.encode(),
    "xliff": XLIFF_1,
    "xliff-2": XLIFF_2,
    "json": JSON,
    "arb": ARB,
    "yaml": RAILS,
    "android": ANDROID,
    "properties": PROPERTIES,
}


def format_of(name: str) -> str:
    return name.removesuffix("-2")


def shout_words(texts: list[str]) -> list[Translated]:
    """Each text with its words (not its placeholders) capitalised, Open %s -> OPEN %s; a
    text about deleting is to review (as if translated with too little confidence)."""
    out = []
    for text in texts:
        kept = placeholders(text)
        spans = sorted(kept, key=len, reverse=True)
        pieces = re.split("(" + "|".join(map(re.escape, spans)) + ")", text) if spans else [text]
        out.append(
            Translated("".join(p if p in kept else p.upper() for p in pieces), "deleted" in text)
        )
    return out
