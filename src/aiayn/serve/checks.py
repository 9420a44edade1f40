"""Reading a request's values without trusting them (named after ``aiayn.checks``, whose rules
it applies to JSON): JSON of bounded depth, whole numbers that
are whole (``1.9`` and ``Infinity`` are refused, never truncated or overflowed), finite numbers,
booleans that mean what they say (``"false"`` is false), text that is valid Unicode (a lone
surrogate cannot be encoded, so it is refused before it reaches a batch), and keys that are
strings. Each check raises ``BadRequest`` with a message naming the field; the app answers
it with 400 in the API's own error shape.

Imports nothing from the rest of ``serve``, so every route module may use it.
"""

from __future__ import annotations

import json
import unicodedata
from typing import Any

from aiayn.checks import Flag, Number, OneOf, Rule, Whole, lone_surrogate
from aiayn.errors import AiaynError
from aiayn.search_options import Texts

MAX_JSON_DEPTH = 32  # nesting a request body may have; deeper is refused before parsing
MAX_SEED = 2**64 - 1  # torch.Generator.manual_seed takes at most this


class BadRequest(AiaynError):
    """A request value of the wrong type, out of range, or not valid text (HTTP 400)."""


def parse_json(raw: bytes | str) -> Any:
    """A JSON body, refused (not parsed) when nested deeper than ``MAX_JSON_DEPTH``.

    Raises:
        BadRequest: not JSON, not UTF-8, or nested too deep.
    """
    if isinstance(raw, bytes):
        try:
            raw = raw.decode("utf-8")
        except UnicodeDecodeError as e:
            raise BadRequest(f"Invalid request: the body is not UTF-8 ({e.reason})") from None
    if json_depth(raw) > MAX_JSON_DEPTH:
        raise BadRequest(f"Invalid request: JSON nested deeper than {MAX_JSON_DEPTH} levels")
    try:
        return json.loads(raw)
    except (ValueError, RecursionError) as e:
        raise BadRequest(f"Invalid request: the body is not JSON ({e})") from None


def json_depth(text: str) -> int:
    """The deepest nesting of ``[`` and ``{`` in JSON text (brackets inside strings are not
    counted); linear, with no recursion."""
    depth = deepest = 0
    in_string = escaped = False
    for char in text:
        if in_string:
            if escaped:
                escaped = False
            elif char == "\\":
                escaped = True
            elif char == '"':
                in_string = False
        elif char == '"':
            in_string = True
        elif char in "[{":
            depth += 1
            deepest = max(deepest, depth)
        elif char in "]}":
            depth -= 1
    return deepest


def value(
    values: dict[str, Any], name: str, rule: Rule, default: Any = None, *, strict: bool = False
) -> Any:
    """``values[name]`` by ``rule`` (``aiayn.checks``), ``default`` when absent: a form's
    or query string's text is parsed (``"3"``, ``"false"``; not when ``strict``: an API
    typed as JSON), a JSON value checked as it is (a whole JSON ``3.0`` counts as 3).

    Raises:
        BadRequest: naming the field and what it must be.
    """
    found = values.get(name)
    if found is None or (found == "" and not strict and not isinstance(rule, Flag)):
        return default
    if isinstance(found, float) and isinstance(rule, Whole) and found.is_integer():
        found = int(found)
    try:
        if isinstance(found, str) and not strict and not isinstance(rule, OneOf | Texts):
            return rule.parse(found)
    except ValueError as e:
        raise BadRequest(f"Invalid request: {name} {e}") from None
    if problem := rule.problem(found):
        raise BadRequest(f"Invalid request: {name} {problem}")
    return found


def whole_number(
    values: dict[str, Any],
    name: str,
    default: int,
    *,
    minimum: int,
    maximum: int,
    strict: bool = False,
) -> int:
    """``values[name]`` as a whole number in [minimum, maximum] (``default`` when absent);
    a form's or query's ``"3"`` counts (unless ``strict``), ``1.9``, ``true`` and
    ``Infinity`` do not."""
    return value(values, name, Whole(minimum, maximum), default, strict=strict)


def finite_number(
    values: dict[str, Any],
    name: str,
    default: float,
    *,
    minimum: float,
    maximum: float,
    strict: bool = False,
) -> float:
    """``values[name]`` as a finite number in [minimum, maximum] (``default`` when absent);
    a form's ``"0.5"`` counts unless ``strict``."""
    return float(value(values, name, Number(minimum, maximum), default, strict=strict))


def boolean(
    values: dict[str, Any], name: str, default: bool = False, *, strict: bool = False
) -> bool:
    """``values[name]`` as a boolean: JSON's true/false, or (unless ``strict``) a form's
    ``"true"``/``"false"``."""
    return value(values, name, Flag(), default, strict=strict)


def text(value: Any, name: str) -> str:
    """A string that is valid Unicode (no lone surrogate: it could never be encoded)."""
    if not isinstance(value, str):
        raise BadRequest(f"Invalid request: {name} must be text, got {type(value).__name__}")
    at = lone_surrogate(value)
    if at is not None:
        raise BadRequest(
            f"Invalid request: {name} holds a lone surrogate (U+{ord(value[at]):04X} at "
            f"character {at + 1}), not valid Unicode"
        )
    return value


def visible(value: str) -> str:
    """``value`` without format characters (zero-width spaces and joiners, BOMs, direction
    marks) and surrounding whitespace: empty when nothing in it could be translated."""
    return "".join(c for c in value if unicodedata.category(c) != "Cf").strip()


def optional_key(value: Any, name: str = "api_key") -> str | None:
    """An API key: a string, or absent."""
    if value is None or isinstance(value, str):
        return value
    raise BadRequest(f"Invalid request: {name} must be a string, got {type(value).__name__}")


def seed(values: dict[str, Any], name: str = "seed", *, strict: bool = False) -> int | None:
    """A sampling seed: absent, or a whole number from 0 to 2**64 - 1."""
    if values.get(name) is None:
        return None
    return whole_number(values, name, 0, minimum=0, maximum=MAX_SEED, strict=strict)


def texts(values: dict[str, Any], name: str, char_limit: int) -> list[str]:
    """``values[name]``: a non-empty string or list of strings, valid Unicode, at most
    ``char_limit`` characters in all (LibreTranslate's ``q``)."""
    found = values.get(name)
    if found is None or found == "" or found == []:
        raise BadRequest(f"Invalid request: missing {name} parameter")
    items = [found] if isinstance(found, str) else found
    if not isinstance(items, list) or not all(isinstance(t, str) for t in items):
        raise BadRequest(f"Invalid request: {name} must be a string or a list of strings")
    size = sum(len(t) for t in items)
    if size > char_limit:
        raise BadRequest(f"Invalid request: request ({size}) exceeds text limit ({char_limit})")
    return [text(t, name) for t in items]


def word(values: dict[str, Any], name: str) -> str:
    """A short string parameter (a language code), stripped; "" when absent."""
    found = values.get(name)
    if found is None:
        return ""
    if not isinstance(found, str):
        raise BadRequest(f"Invalid request: {name} must be a string, got {type(found).__name__}")
    return text(found, name).strip()


def file_text(content: bytes | None, char_limit: int) -> str:
    """A text file's content (UTF-8, a byte-order mark allowed), within the text limit
    (``None``: a file of more bytes than that many characters can take, left unread).

    Raises:
        BadRequest: an empty, undecodable or too long file.
    """
    if content is None:
        raise BadRequest(f"Invalid request: the file exceeds text limit ({char_limit})")
    try:
        found = content.decode("utf-8-sig")
    except UnicodeDecodeError as e:
        raise BadRequest(f"Invalid request: the file is not UTF-8 text ({e.reason})") from None
    if not found.strip():
        raise BadRequest("Invalid request: empty file")
    if len(found) > char_limit:
        raise BadRequest(
            f"Invalid request: request ({len(found)}) exceeds text limit ({char_limit})"
        )
    return found
