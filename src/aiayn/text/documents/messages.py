"""The strings of an application's message catalogue: the placeholders they hold, which must
come back byte for byte, and ICU MessageFormat's plural and select arguments, whose inner
texts are translated while their selectors are kept.

    >>> message = icu_message("You have {n, plural, one {# file} other {# files}} left")
    >>> message.texts
    ['You have', '# file', '# files', 'left']
    >>> message.render(["Du hast", "# Datei", "# Dateien", "übrig"])
    'Du hast {n, plural, one {# Datei} other {# Dateien}} übrig'
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache

import regex

from aiayn.text.protect import (
    BUILT_IN,
    SENTINELS,
    UNBALANCED,
    ProtectError,
    compile_patterns,
    mask,
)

# What a catalogue's strings hold besides aiayn.text.protect's built-in placeholders
# (printf's %s, %1$s, %(n)d and iOS's %@, {0}, {name}, {{count}}, $VAR, ${x}, URLs)
PLACEHOLDERS: tuple[str, ...] = (
    r"<xliff:g\b[^>]*>.*?</xliff:g>",  # Android: a span not to translate, whole
    r"<mrk\b[^>]*\btranslate=\"no\"[^>]*>.*?</mrk>",  # XLIFF 2.0: the same
    r"%(?:\d+\$)?[-#0+ ']*(?:\d+|\*)?(?:\.(?:\d+|\*))?(?:hh|ll|[hlLqjzt])"
    r"[diouxXeEfFgGaAcCsSpn@]",  # printf with a length: %ld, %lld, %1$lld, %zu
    r"%#@\w+@",  # Apple's stringsdict: %#@files@
    r"%[-_0^#]?[A-Za-z]",  # any other conversion: Java's %n, strftime's %Y, %m, %u
    r"%%",  # a printf string's literal percent sign
    r"%\{[^{}\s]+\}",  # Ruby i18n: %{count}
    r"%<[^<>\s]+>[-#0+ ]*\d*(?:\.\d+)?[A-Za-z]",  # Ruby format: %<count>d
    r"\$t\([^()\n]*\)",  # i18next nesting: $t(key)
    r"</?[A-Za-z][\w:.-]*(?:\s[^<>]*)?/?>",  # markup: <b>, </a>, <a href="...">, <br/>
    r"&(?:[A-Za-z][A-Za-z0-9]*|#\d+|#x[0-9A-Fa-f]+);",  # XML and HTML entities
    r"(?<!\S)#(?!\S)",  # ICU's number sign in a plural branch: "# files"
)
NOT_TEXT = regex.compile(
    r"[@?][\w.:]*\w/[\w.]+"  # a resource reference
    r"|(?i:true|false|null|~)|[-+]?\d[\d_]*(?:\.\d+)?(?:[eE][-+]?\d+)?|:\w+"  # YAML's others
)
# what every protected span holds (URLs and e-mail addresses: "." and "@")
SPAN_CHARACTERS = regex.compile(r"[{}%$<>&#`@.]")
ICU_ARGUMENT = regex.compile(r"\{\s*[\w.-]+\s*,\s*(?:plural|selectordinal|select)\s*,")
ICU_KEY = regex.compile(r"\s*((?:offset:\s*\d+\s+)?(?:=\d+|[\w-]+))\s*\{")


class MessageError(ValueError):
    """An ICU message whose braces do not balance."""


def placeholders(text: str) -> Counter[str]:
    """Every placeholder ``text`` holds (leftmost first, of the patterns in their order): a
    translation keeps its source's placeholders when the two counts are equal."""
    if not SPAN_CHARACTERS.search(text):
        return Counter()
    return Counter(m.group() for m in _one_pattern().finditer(text))


@lru_cache(maxsize=1)
def _compiled() -> tuple[regex.Pattern, ...]:
    return compile_patterns(PLACEHOLDERS)


@lru_cache(maxsize=1)
def _one_pattern() -> regex.Pattern:
    """All the patterns as one, a catalogue's own first ($t(key) before $VAR); ours, none
    of which runs away, so no time limit is needed."""
    patterns = (*PLACEHOLDERS, *BUILT_IN.values())
    return regex.compile("|".join(f"(?:{p})" for p in patterns))


def has_text(text: str) -> bool:
    """Whether ``text`` holds something to translate: a letter outside its placeholders and
    markup, and not a resource reference (Android's ``@string/name``, ``?attr/name``) nor
    a YAML value of another type (``true``, ``10``, a Ruby symbol ``:year``)."""
    if NOT_TEXT.fullmatch(text.strip()):
        return False
    return any(c.isalpha() for c in _one_pattern().sub(" ", text))


def protect_problem(text: str) -> str | None:
    """Why ``text``'s placeholders cannot be protected (an unbalanced brace, too many
    spans); None when they can."""
    found = sum(placeholders(text).values())
    if found < len(SENTINELS) // 2 and not UNBALANCED.search(_one_pattern().sub(" ", text)):
        return None  # the spans fit, and what is left of the text is balanced
    try:
        mask(text, _compiled())
    except ProtectError as e:
        return str(e)
    return None


@dataclass(frozen=True)
class Choice:
    """One ICU plural or select argument: its head (``{n, plural,``), its branches' keys
    with the spacing around them, and each branch's message."""

    head: str
    keys: tuple[str, ...]
    branches: tuple[Message, ...]


@dataclass(frozen=True)
class Message:
    """A message as literal text and ICU choices, in order; ``texts`` are its literal
    pieces with a letter, which a translation replaces (``render``)."""

    pieces: tuple[str | Choice, ...]

    @property
    def texts(self) -> list[str]:
        out: list[str] = []
        for piece in self.pieces:
            if isinstance(piece, Choice):
                out += [t for branch in piece.branches for t in branch.texts]
            elif _worded(piece):
                out.append(piece.strip())
        return out

    def render(self, translations: Sequence[str]) -> str:
        """The message with its texts replaced by ``translations`` (one each, in order)."""
        left = list(translations)
        out = self._render(left)
        if left:
            raise ValueError(f"{len(left)} translations left over")
        return out

    def _render(self, left: list[str]) -> str:
        out = []
        for piece in self.pieces:
            if isinstance(piece, Choice):
                branches = zip(piece.keys, piece.branches, strict=True)
                inner = "".join(f"{key}{{{m._render(left)}}}" for key, m in branches)
                out.append(f"{piece.head}{inner}}}")
            elif _worded(piece):
                lead, tail = _spacing(piece)
                out.append(lead + left.pop(0) + tail)
            else:
                out.append(piece)
        return "".join(out)


def _worded(text: str) -> bool:
    return any(c.isalpha() for c in text)


def _spacing(text: str) -> tuple[str, str]:
    stripped = text.strip()
    start = text.find(stripped)
    return text[:start], text[start + len(stripped) :]


def icu_message(text: str) -> Message:
    """``text`` parsed as an ICU message: its plural, selectordinal and select arguments
    found (nested ones too); any other text, simple arguments (``{name}``) included, is
    literal. A text with no such argument is one literal piece.

    Raises:
        MessageError: a choice argument whose braces do not balance.
    """
    pieces: list[str | Choice] = []
    at = 0
    while (found := ICU_ARGUMENT.search(text, at)) is not None:
        pieces.append(text[at : found.start()])
        choice, at = _choice(text, found.start(), found.end())
        pieces.append(choice)
    pieces.append(text[at:])
    return Message(tuple(p for p in pieces if p != ""))


def _choice(text: str, start: int, at: int) -> tuple[Choice, int]:
    """The choice argument that opens at ``start`` (its head read up to ``at``) and where
    it ends."""
    head, keys, branches = text[start:at], [], []
    while (key := ICU_KEY.match(text, at)) is not None:
        close = _closing(text, key.end() - 1)
        keys.append(text[at : key.end() - 1])
        branches.append(icu_message(text[key.end() : close]))
        at = close + 1
    end = regex.compile(r"\s*\}").match(text, at)
    if not keys or end is None:
        raise MessageError(f"ICU argument at character {start + 1} does not close")
    return Choice(head, tuple(keys), tuple(branches)), end.end()


def _closing(text: str, opening: int) -> int:
    """Where the brace at ``opening`` closes (ICU's quoting: '{' and '}' are literal)."""
    depth, i = 0, opening
    while i < len(text):
        c = text[i]
        if c == "'" and i + 1 < len(text) and text[i + 1] in "{}":
            quote = text.find("'", i + 1)
            i = len(text) if quote < 0 else quote + 1
            continue
        depth += {"{": 1, "}": -1}.get(c, 0)
        if depth == 0:
            return i
        i += 1
    raise MessageError(f"ICU brace at character {opening + 1} does not close")


def is_icu(text: str) -> bool:
    """Whether ``text`` holds an ICU plural, selectordinal or select argument."""
    return ICU_ARGUMENT.search(text) is not None
