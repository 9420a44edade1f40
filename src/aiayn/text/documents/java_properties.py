"""Java properties files: read and written by translate-toolkit in the encoding they came
in: UTF-8 (Java 9's resource bundles) as UTF-8, ASCII or ISO-8859-1 (what
``Properties.load`` reads) as ASCII with Java's escapes."""

from __future__ import annotations

from typing import Any


def _store(name: str, data: bytes) -> Any:
    from translate.storage import properties

    store = getattr(properties, name)()
    store.parse(data)
    return store


def read_properties(data: bytes) -> Any:
    """Java properties: a UTF-8 file (Java 9's resource bundles) is read as UTF-8; an ASCII
    or ISO-8859-1 one (``Properties.load``'s encoding) with its other characters as the
    escapes Java reads (``_escaped``), as ``as_properties`` writes it back."""
    if not data.isascii() and _is_utf8(data):
        return _store("javautf8file", data)
    return _store("javafile", _escaped(data.decode("latin-1")))


def as_properties(out: bytes, source: bytes) -> bytes:
    """A properties file in its source's encoding: UTF-8 as it is, else ASCII."""
    return out if not source.isascii() and _is_utf8(source) else _escaped(out.decode("utf-8"))


def _escaped(text: str) -> bytes:
    """``text`` in ASCII, each other character as Java's escapes of its UTF-16 units."""
    return "".join(c if c.isascii() else _java_escape(c) for c in text).encode("ascii")


def _java_escape(character: str) -> str:
    units = character.encode("utf-16-be")
    return "".join(f"\\u{units[i] << 8 | units[i + 1]:04x}" for i in range(0, len(units), 2))


def _is_utf8(data: bytes) -> bool:
    try:
        data.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True
