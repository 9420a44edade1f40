"""YAML localisation files (Rails' ``config/locales/*.yml``, plain key-value YAML), read and
written by ruamel.yaml's round trip, which keeps comments, anchors, aliases, quoting and
every value that is no text (numbers, booleans, nulls, Ruby symbols) as it was.

The units are the string values, named by their path (``number.format.unit``); a mapping
whose keys are CLDR plural categories (``one``, ``other``, ...) is one plural unit, except
its ``zero`` key, which Rails uses for a count of 0 and is its own unit. A Rails file (one
root key, a language's code) is rooted at the target language once written. The units look
as translate-toolkit's do to ``aiayn.text.documents.catalogue``.
"""

from __future__ import annotations

import io
from typing import Any

import regex

CATEGORIES = ("zero", "one", "two", "few", "many", "other")
MAX_NODES = 200_000  # mappings and lists visited, each once however often it is aliased
LOCALE = regex.compile(r"[a-z]{2,3}(?:[-_][A-Za-z0-9]{2,8})*")


class YamlUnit:
    """One string value (or one plural mapping) of the file."""

    def __init__(self, parent: Any, key: Any, path: list[str], plural: bool = False):
        self._parent, self._key, self._path, self._plural = parent, key, path, plural
        value = parent[key]
        if plural:
            from translate.misc.multistring import multistring

            self.source = multistring([str(value[c]) for c in CATEGORIES[1:] if c in value])
        else:
            self.source = str(value)
        self.tags: list[str] = []  # the target's plural categories, set by the store

    @property
    def target(self) -> str:
        return ""

    @target.setter
    def target(self, value: Any) -> None:
        if not self._plural:
            self._parent[self._key] = _like(self._parent[self._key], str(value))
            return
        forms = list(getattr(value, "strings", [value]))
        mapping = self._parent[self._key]
        tags = self.tags or [c for c in CATEGORIES[1:] if c in mapping][: len(forms)]
        old = {c: mapping[c] for c in CATEGORIES[1:] if c in mapping}
        for category in old:
            del mapping[category]
        for tag, form in zip(tags, forms, strict=False):
            mapping[tag] = _like(old.get(tag, old.get("other", "")), str(form))

    def getid(self) -> str:
        return ".".join(self._path)

    def getcontext(self) -> str:
        return ""

    def getnotes(self) -> str:
        return ""

    def isheader(self) -> bool:
        return False

    def isblank(self) -> bool:
        return False


def _like(old: Any, text: str) -> Any:
    """``text`` quoted as ``old`` was (ruamel's scalar strings keep their style)."""
    kind = type(old)
    return kind(text) if isinstance(old, str) and kind is not str else text


class YamlStore:
    """A YAML file's units, and the file with their targets (``bytes``)."""

    def __init__(self, data: bytes):
        from ruamel.yaml import YAML

        self._yaml = YAML(typ="rt")
        self._yaml.preserve_quotes = True
        self._yaml.width = 4096  # no re-wrapping of long lines
        self._tree = self._yaml.load(data)  # its errors: aiayn...base.reading names them
        self.rails = _rails_root(self._tree)
        root = self._tree[next(iter(self._tree))] if self.rails else self._tree
        self.units: list[YamlUnit] = []
        self._seen: set[int] = set()
        self._walk(root, [])
        self.targetlanguage: str | None = None

    def _walk(self, node: Any, path: list[str]) -> None:
        if not isinstance(node, dict | list) or id(node) in self._seen:
            return  # a value that is no text, or an alias (its values are its anchor's)
        self._seen.add(id(node))
        if len(self._seen) > MAX_NODES:
            raise ValueError(f"over {MAX_NODES:,} mappings and lists: refused")
        if isinstance(node, dict):  # a merge key's values are the merged mapping's, not its own
            items = node.non_merged_items() if hasattr(node, "non_merged_items") else node.items()
        else:
            items = enumerate(node)
        for key, value in list(items):
            where = [*path, str(key)]
            if _is_plural(value):
                self.units.append(YamlUnit(node, key, where, plural=True))
                if isinstance(value.get("zero"), str):
                    self.units.append(YamlUnit(value, "zero", [*where, "zero"]))
            elif isinstance(value, str):
                self.units.append(YamlUnit(node, key, where))
            else:
                self._walk(value, where)

    def settargetlanguage(self, code: str) -> None:
        """The target language: a Rails file's root key (pt-BR, as Rails spells it)."""
        self.targetlanguage = code
        if self.rails:
            old = next(iter(self._tree))
            self._tree.insert(0, code.replace("_", "-"), self._tree.pop(old))

    def gettargetlanguage(self) -> str | None:
        return self.targetlanguage

    def set_plural_tags(self, tags: list[str]) -> None:
        for unit in self.units:
            unit.tags = tags

    def __bytes__(self) -> bytes:
        out = io.StringIO()
        self._yaml.dump(self._tree, out)
        return out.getvalue().encode("utf-8")


def _is_plural(value: Any) -> bool:
    return (
        isinstance(value, dict)
        and "other" in value
        and all(k in CATEGORIES and isinstance(v, str) for k, v in value.items())
    )


def _rails_root(tree: Any) -> bool:
    """Whether ``tree`` is a Rails file: one root key, a language's code, over a mapping."""
    return (
        isinstance(tree, dict)
        and len(tree) == 1
        and isinstance(key := next(iter(tree)), str)
        and LOCALE.fullmatch(key) is not None
        and isinstance(tree[key], dict)
    )
