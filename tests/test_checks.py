"""Text checked one way: the lone surrogate that makes a string invalid Unicode, found by one
helper and reported by each layer with its own error, at the same position."""

from __future__ import annotations

import pytest

from aiayn.checks import lone_surrogate
from aiayn.serve.checks import BadRequest, text
from aiayn.translate.inputs import TranslationError, check_lines


@pytest.mark.parametrize(
    ("value", "at"),
    [
        ("plain text", None),
        ("", None),
        ("日本語 😀 ok", None),  # astral characters are a pair in UTF-16, one code point here
        ("\ud800", 0),
        ("ab\udc80cd", 2),
        ("a\ud83d\ude00b \ud800", 1),  # a surrogate pair left unjoined is two lone ones
    ],
)
def test_lone_surrogate_finds_the_first_one(value, at):
    assert lone_surrogate(value) == at


def test_translator_and_server_report_the_same_character():
    """Both layers raise their own error type, naming the same 1-based character."""
    line = "ok \udfff then"
    with pytest.raises(
        TranslationError, match=r"line 2: a lone surrogate \(U\+DFFF at character 4\)"
    ):
        check_lines(["fine", line])
    with pytest.raises(BadRequest, match=r"q holds a lone surrogate \(U\+DFFF at character 4\)"):
        text(line, "q")
    assert text("fine", "q") == "fine"
