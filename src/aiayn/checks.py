"""One way to check a number or a choice, for every layer that reads one.

A rule (``Whole``, ``Number``, ``OneOf``, ``Flag``) says what a value may be. ``problem``
checks a value that is already typed (a config field, a JSON request value) and says in
words what is wrong with it, or None; ``parse`` reads one from text (a command-line
option, a form or query-string value) and checks it. Each layer raises its own error with
the words: the config layer ``ConfigError`` (``check``), the server ``BadRequest``, the
command line argparse's one-line error. A boolean is never a number (``beam=True`` is
refused), NaN and infinities are never in range, ``1.9`` is not a whole number. Text is
checked the same way: ``lone_surrogate`` finds what makes a string invalid Unicode.

Imports nothing from aiayn but the errors, so every layer may use it.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

from aiayn.errors import ConfigError

TRUE, FALSE = ("true", "1", "yes", "on"), ("false", "0", "no", "off", "")


class Rule(Protocol):
    def problem(self, value: Any) -> str | None:
        """What is wrong with ``value`` ("must be ..., got ..."), or None."""
        ...

    def parse(self, text: str) -> Any:
        """The value ``text`` spells. Raises ValueError saying what is wrong."""
        ...


def _bounds(minimum: float | None, maximum: float | None, above: bool, below: bool) -> str:
    if minimum is not None and maximum is not None and not (above or below):
        return f"from {_shown(minimum)} to {_shown(maximum)}"
    low = None if minimum is None else f"{'above' if above else 'at least'} {_shown(minimum)}"
    high = None if maximum is None else f"{'below' if below else 'at most'} {_shown(maximum)}"
    return " and ".join(part for part in (low, high) if part)


def _shown(bound: float) -> str:
    return str(bound) if isinstance(bound, int) else f"{bound:g}"


@dataclass(frozen=True)
class Number:
    """A finite number in range: ``minimum`` (exclusive with ``above``) to ``maximum``
    (exclusive with ``below``); a whole number is one too."""

    minimum: float | None = None
    maximum: float | None = None
    above: bool = False
    below: bool = False

    def describe(self) -> str:
        bounds = _bounds(self.minimum, self.maximum, self.above, self.below)
        return f"a number {bounds}".rstrip()

    def problem(self, value: Any) -> str | None:
        if isinstance(value, bool) or not isinstance(value, int | float):
            return f"must be {self.describe()}, got {value!r}"
        low, high = self.minimum, self.maximum
        if not math.isfinite(value) or (
            (low is not None and (value <= low if self.above else value < low))
            or (high is not None and (value >= high if self.below else value > high))
        ):
            return f"must be {self.describe()}, got {value!r}"
        return None

    def parse(self, text: str) -> float:
        return _parsed(self, text, float, self.describe())


@dataclass(frozen=True)
class Whole:
    """A whole number (never a boolean, never ``1.9``) from ``minimum`` to ``maximum``."""

    minimum: int | None = None
    maximum: int | None = None

    def describe(self) -> str:
        return f"a whole number {_bounds(self.minimum, self.maximum, False, False)}".rstrip()

    def problem(self, value: Any) -> str | None:
        if isinstance(value, bool) or not isinstance(value, int):
            return f"must be {self.describe()}, got {value!r}"
        if (self.minimum is not None and value < self.minimum) or (
            self.maximum is not None and value > self.maximum
        ):
            return f"must be {self.describe()}, got {value!r}"
        return None

    def parse(self, text: str) -> int:
        return _parsed(self, text, lambda t: int(t.strip()), self.describe())


@dataclass(frozen=True)
class OneOf:
    """One of a few strings."""

    choices: tuple[str, ...]

    def problem(self, value: Any) -> str | None:
        if isinstance(value, str) and value in self.choices:
            return None
        return f"must be one of {', '.join(self.choices)}, got {value!r}"

    def parse(self, text: str) -> str:
        if found := self.problem(text):
            raise ValueError(found)
        return text


@dataclass(frozen=True)
class Flag:
    """True or false; as text ``true``/``false`` (also ``1``/``0``, ``yes``/``no``,
    ``on``/``off``)."""

    def problem(self, value: Any) -> str | None:
        return None if isinstance(value, bool) else f"must be true or false, got {value!r}"

    def parse(self, text: str) -> bool:
        word = text.strip().lower()
        if word not in TRUE + FALSE:
            raise ValueError(f"must be true or false, got {text!r}")
        return word in TRUE


def _parsed(rule: Rule, text: str, convert: Callable[[str], Any], kind: str) -> Any:
    """``text`` converted and checked by ``rule``. Raises ValueError saying what is wrong."""
    try:
        value = convert(text)
    except ValueError:
        raise ValueError(f"must be {kind}, got {text!r}") from None
    if found := rule.problem(value):
        raise ValueError(found)
    return value


def check(owner: Any, rules: dict[str, Rule], error: type[Exception], where: str = "") -> None:
    """Raise ``error`` naming the first attribute of ``owner`` that breaks its rule
    (``where`` goes before its name: ``"ServeSettings."``)."""
    for name, rule in rules.items():
        if found := rule.problem(getattr(owner, name)):
            raise error(f"{where}{name} {found}")


def lone_surrogate(text: str) -> int | None:
    """The index in ``text`` of its first lone surrogate (a code point of U+D800-U+DFFF
    standing alone, which no encoding can write, so the text could never be tokenized or
    sent back), or None where ``text`` is valid Unicode."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as e:
        return e.start
    return None


@dataclass(frozen=True)
class Maybe:
    """None (the default, whatever it stands for), or a value that ``rule`` accepts."""

    rule: Any

    def problem(self, value: Any) -> str | None:
        return None if value is None else self.rule.problem(value)

    def parse(self, text: str) -> Any:
        return self.rule.parse(text)


@dataclass(frozen=True)
class Text:
    """A non-empty string (a path, a name)."""

    def problem(self, value: Any) -> str | None:
        if isinstance(value, str) and value:
            return None
        return f"must be a non-empty string, got {value!r}"

    def parse(self, text: str) -> str:
        if not text:
            raise ValueError("must not be empty")
        return text


def check_ranges(
    cfg: Any,
    *,
    at_least_1: tuple[str, ...] = (),
    at_least_0: tuple[str, ...] = (),
    above_0: tuple[str, ...] = (),
    below_1: tuple[str, ...] = (),
) -> None:
    """Raise ConfigError naming the first field of ``cfg`` outside its range, by the rules
    of ``aiayn.checks`` (a boolean is no number, NaN is in no range): ``at_least_1`` or
    ``at_least_0`` (whole numbers where the field is an ``int``), numbers ``above_0``,
    fractions in [0, 1) ``below_1``."""
    whole = {f.name for f in dataclasses.fields(cfg) if f.type in ("int", int)}

    def least(name: str, low: int) -> Rule:
        return Whole(low) if name in whole else Number(float(low))

    rules: dict[str, Rule] = {
        **{name: least(name, 1) for name in at_least_1},
        **{name: least(name, 0) for name in at_least_0},
        **dict.fromkeys(above_0, Number(0.0, above=True)),
        **dict.fromkeys(below_1, Number(0.0, 1.0, below=True)),
    }
    check(cfg, rules, ConfigError)
