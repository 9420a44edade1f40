"""A ``--pair`` such as ``en-ko`` read as two language codes mtdata knows, checked in a
fraction of a second: its ISO tables only, before the corpus index (seconds to a minute to
load) is read."""

from __future__ import annotations

from mtdata.iso.bcp47 import bcp47

from aiayn.data.corpus import CorpusError


def languages(pair: str) -> tuple[str, str]:
    """``"en-ko"`` as ``("en", "ko")``, each a code mtdata knows (ISO 639-1 or -3).

    Raises:
        CorpusError: not two codes joined by ``-``, or a code no language has.
    """
    parts = pair.split("-")
    if len(parts) != 2 or not all(parts) or parts[0] == parts[1]:
        raise CorpusError(f"--pair {pair!r}: give two language codes, e.g. en-ko")
    for code in parts:
        try:
            bcp47(code)
        except (ValueError, AssertionError):
            raise CorpusError(f"--pair {pair!r}: {code!r} is not a language code") from None
    return parts[0], parts[1]
