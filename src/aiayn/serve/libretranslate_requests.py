"""A translation request's own decoding options (the server's ``ServeSettings.decode`` are
the defaults; ``SearchOptions`` names the request parameter of each field a request may
set), and what its answer adds: each translation's confidence and, under a minimum,
whether its source was given back.

Request fields: ``format`` (text or html), ``protect_spans`` and ``impose_spans``
(true/false), ``protect`` (a regex or a list of them), ``glossary`` (an object ``{"source
term": "target term"}``, a list of two-item lists, or TSV text; its terms join the server's
glossary and win where both have a term), ``min_confidence`` (0 to 1). Answer fields:
``confidence`` (and ``flagged`` when a minimum applies), a number (a boolean) per text, as
``translatedText`` is a string or a list, and ``sentences``: per text, its translation's
sentences as ``{"text", "confidence"}`` (their texts stand in its ``translatedText`` in that
order; a text given back or translated as HTML is one), which the web page underlines one by
one.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from aiayn.errors import ConfigError
from aiayn.search_options import SearchOptions
from aiayn.serve import checks
from aiayn.serve.checks import BadRequest
from aiayn.text.glossary import Glossary, GlossaryError, tsv_pairs
from aiayn.text.protect import pattern_problem
from aiayn.translate.terms import Translation

MAX_REQUEST_TERMS = 1_000  # glossary terms one request may send
MAX_REQUEST_PATTERNS = 32  # protect patterns one request may send (each runs on every sentence)


def requested_options(base: SearchOptions, values: dict[str, Any]) -> SearchOptions:
    """``base`` (the server's decoding options) with those a request gives: each field
    that names a request parameter (``aiayn.search_options.option(request=...)``), read
    by its field's rule; a request's protect patterns and glossary join the server's.

    Raises:
        BadRequest: a value of the wrong type, a pattern that does not compile, an empty
            or malformed glossary, a number out of range (one line, naming the field).
    """
    changes = {}
    for field in dataclasses.fields(SearchOptions):
        name = field.metadata["request"]
        if name is None or values.get(name) is None:
            continue
        if field.name in JOINED:
            changes[field.name] = JOINED[field.name](values[name], getattr(base, field.name))
        else:
            own = getattr(base, field.name)
            changes[field.name] = checks.value(values, name, field.metadata["rule"], own)
    try:
        options = dataclasses.replace(base, **changes)
    except ConfigError as e:
        raise BadRequest(f"Invalid request: {str(e).removeprefix('SearchOptions.')}") from None
    if problem := pattern_problem(options.protect_patterns):
        raise BadRequest(f"Invalid request: {problem}")
    return options


def _patterns(value: Any, server: tuple[str, ...]) -> tuple[str, ...]:
    if value is None or value == "" or value == []:
        return server
    patterns = [value] if isinstance(value, str) else value
    if not isinstance(patterns, list) or not all(isinstance(p, str) for p in patterns):
        raise BadRequest("Invalid request: protect must be a regex or a list of regexes")
    if len(patterns) > MAX_REQUEST_PATTERNS:
        raise BadRequest(f"Invalid request: protect: at most {MAX_REQUEST_PATTERNS} patterns")
    return server + tuple(checks.text(p, "protect") for p in patterns)


def _glossary(value: Any, default: Glossary | None) -> Glossary | None:
    if value is None:
        return default
    if isinstance(value, str):
        try:
            pairs: list[Any] = [fields for _, fields in tsv_pairs(value, "glossary")]
        except GlossaryError as e:
            raise BadRequest(f"Invalid request: {e}") from None
    elif isinstance(value, dict):
        pairs = [list(item) for item in value.items()]
    elif isinstance(value, list):
        pairs = value
    else:
        raise BadRequest(
            "Invalid request: glossary must be an object of terms, a list of "
            "[source, target] pairs or TSV text"
        )
    if len(pairs) > MAX_REQUEST_TERMS:
        raise BadRequest(f"Invalid request: glossary: at most {MAX_REQUEST_TERMS} terms")
    try:
        asked = Glossary.from_pairs(pairs, origin="Invalid request: glossary")
    except GlossaryError as e:
        raise BadRequest(str(e)) from None
    if default is None:
        return asked
    merged = {t.source.casefold(): (t.source, t.target) for t in default.terms}
    merged.update({t.source.casefold(): (t.source, t.target) for t in asked.terms})
    return Glossary.from_pairs(list(merged.values()), origin="glossary")


JOINED = {"protect_patterns": _patterns, "glossary": _glossary}  # request values join the server's


def answer_fields(found: list[list[Translation]], *, single: bool, flagging: bool) -> dict:
    """``confidence`` (and ``flagged`` where a minimum confidence applies) and
    ``sentences`` (each sentence's text and confidence) of the best translation of each
    text: one value for a single text, else a list."""
    confidence = [round(hyps[0].confidence, 4) for hyps in found]
    flagged = [hyps[0].flagged for hyps in found]
    sentences = [
        [{"text": s.text, "confidence": round(s.confidence, 4)} for s in hyps[0].by_sentence()]
        for hyps in found
    ]
    body: dict[str, Any] = {
        "confidence": confidence[0] if single else confidence,
        "sentences": sentences[0] if single else sentences,
    }
    if flagging:
        body["flagged"] = flagged[0] if single else flagged
    return body
