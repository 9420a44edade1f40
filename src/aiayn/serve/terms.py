"""A translation request's protected spans, glossary and minimum confidence (the server's
settings are the defaults), and what its answer adds: each translation's confidence and,
under a minimum, whether its source was given back.

Request fields: ``protect_spans`` (true/false), ``protect`` (a regex or a list of them),
``glossary`` (an object ``{"source term": "target term"}``, a list of two-item lists, or
TSV text; its terms join the server's glossary and win where both have a term),
``min_confidence`` (0 to 1). Answer fields: ``confidence`` (and ``flagged`` when a minimum
applies), a number (a boolean) per text, as ``translatedText`` is a string or a list.
"""

from __future__ import annotations

from typing import Any

from aiayn.decode.terms import Translation, check_terms
from aiayn.serve import checks
from aiayn.serve.checks import BadRequest
from aiayn.text.glossary import Glossary, GlossaryError

MAX_REQUEST_TERMS = 1_000  # glossary terms and patterns one request may send
FIELDS = ("protect_spans", "protect", "glossary", "min_confidence")


def term_fields(
    values: dict[str, Any],
    *,
    protect: bool,
    patterns: tuple[str, ...],
    glossary: Glossary | None,
    min_confidence: float,
) -> dict[str, Any]:
    """The ``SearchOptions`` fields of a request, the server's values where it gives none.

    Raises:
        BadRequest: a field of the wrong type, a pattern that does not compile, an empty
            or malformed glossary, a minimum outside [0, 1] (one line, naming the field).
    """
    found = {
        "protect": checks.boolean(values, "protect_spans", protect),
        "protect_patterns": patterns + _patterns(values.get("protect")),
        "glossary": _glossary(values.get("glossary"), glossary),
        "min_confidence": checks.finite_number(
            values, "min_confidence", min_confidence, minimum=0.0, maximum=1.0
        ),
    }
    problem = check_terms(
        found["min_confidence"], found["protect"], found["protect_patterns"], found["glossary"]
    )
    if problem:
        raise BadRequest(f"Invalid request: {problem}")
    return found


def _patterns(value: Any) -> tuple[str, ...]:
    if value is None or value == "" or value == []:
        return ()
    patterns = [value] if isinstance(value, str) else value
    if not isinstance(patterns, list) or not all(isinstance(p, str) for p in patterns):
        raise BadRequest("Invalid request: protect must be a regex or a list of regexes")
    if len(patterns) > MAX_REQUEST_TERMS:
        raise BadRequest(f"Invalid request: protect: at most {MAX_REQUEST_TERMS} patterns")
    return tuple(checks.text(p, "protect") for p in patterns)


def _glossary(value: Any, default: Glossary | None) -> Glossary | None:
    if value is None:
        return default
    if isinstance(value, str):
        rows = [line.split("\t") for line in value.splitlines() if line.strip()]
        pairs: list[Any] = [r if len(r) == 2 else [r] for r in rows]
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


def answer_fields(found: list[list[Translation]], *, single: bool, flagging: bool) -> dict:
    """``confidence`` (and ``flagged`` where a minimum confidence applies) of the best
    translation of each text: one value for a single text, else a list."""
    confidence = [round(hyps[0].confidence, 4) for hyps in found]
    flagged = [hyps[0].flagged for hyps in found]
    body: dict[str, Any] = {"confidence": confidence[0] if single else confidence}
    if flagging:
        body["flagged"] = flagged[0] if single else flagged
    return body
