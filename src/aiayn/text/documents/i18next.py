"""i18next's plural keys: ``key_one``, ``key_other``, ... beside each other in a JSON
object, one per CLDR category of the language (i18next picks the key by
``Intl.PluralRules``). A translated file gets the target language's categories: a missing
one takes the ``_other`` key's translation; every key of the source stays (``_zero`` too,
which i18next uses for a count of 0 where it is given, and ordinal keys, ``key_ordinal_one``,
which are the source language's). Keys that only look alike (``step_one``, ``step_two``
without ``step_other``) are no plural."""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from typing import Any

PLURAL_KEY = re.compile(r"(.+)_(zero|one|two|few|many|other)")
INDENT = re.compile(rb"\n([ \t]+)\S")


def with_plural_keys(data: bytes, tags: Sequence[str], source: bytes) -> bytes:
    """``data`` (a translated JSON file) with each plural's missing ``tags`` (the target's
    categories), laid out as ``source`` is (its indentation, its final line break)."""
    tree = json.loads(data)
    if tags:
        _add_keys(tree, tags)
    found = INDENT.search(source)
    indent = None if found is None else found.group(1).decode()
    indent = len(indent) if indent is not None and indent.strip(" ") == "" else indent
    end = "\n" if source.rstrip(b" \t").endswith(b"\n") else ""
    return (json.dumps(tree, ensure_ascii=False, indent=indent) + end).encode("utf-8")


def _add_keys(node: Any, tags: Sequence[str]) -> None:
    if isinstance(node, list):
        for value in node:
            _add_keys(value, tags)
        return
    if not isinstance(node, dict):
        return
    for value in node.values():
        _add_keys(value, tags)
    last: dict[str, str] = {}  # each plural's last key
    for key in node:
        found = PLURAL_KEY.fullmatch(key)
        plural = found and isinstance(node.get(f"{found[1]}_other"), str)
        if plural and not found[1].endswith("_ordinal"):
            last[found[1]] = key
    if not last:
        return
    ends = {key: base for base, key in last.items()}  # a plural's last key: its base
    out = {}
    for key, value in node.items():
        out[key] = value
        base = ends.get(key)
        if base is not None:
            for tag in tags:
                out.setdefault(f"{base}_{tag}", node.get(f"{base}_{tag}", node[f"{base}_other"]))
    node.clear()
    node.update(out)
