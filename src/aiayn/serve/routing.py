"""Which served models translate a request: the model of its pair, or two through English.

A pair with no model of its own, A -> B, is translated through English when A -> en and
en -> B are served (Argos Translate's pivot): two decodes, the first one's best translation
given to the second (protected spans kept by both; a glossary imposed by the second only).
A model of the pair's own always wins. ``source: auto`` with a list detects each text on its
own; the texts of each source language go to their model in one request, the languages'
requests side by side.
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass

from aiayn.data.tokenizer import Tokenizer
from aiayn.decode.translator import Translation
from aiayn.search_options import SearchOptions
from aiayn.serve.engine import TranslationEngine

PIVOT = "en"  # the language pairs are bridged through


@dataclass(eq=False)
class Pair:
    """One served model: its language pair and the engine that decodes for it."""

    model: str
    source: str  # ISO code, or "auto" / "target" when the model directory names none
    target: str
    tokenizer: Tokenizer  # the source side's: a multilingual model's target tokens
    engine: TranslationEngine


Leg = tuple[Pair, "str | None"]  # a model and the target token it is given
Decode = Callable[
    [Pair, list[str], SearchOptions, "str | None"], Awaitable[list[list[Translation]]]
]


def pivots(pairs: dict[tuple[str, str], Pair]) -> dict[tuple[str, str], tuple[Pair, Pair]]:
    """Every pair translated through ``PIVOT``: A -> en and en -> B served, A -> B not."""
    found = {}
    for (source, middle), first in pairs.items():
        if middle != PIVOT or source == PIVOT:
            continue
        for (start, target), second in pairs.items():
            if start == PIVOT and target not in (source, PIVOT) and (source, target) not in pairs:
                found[source, target] = (first, second)
    return found


async def translate_legs(
    decode: Decode, legs: Sequence[Leg], texts: list[str], options: SearchOptions
) -> list[list[Translation]]:
    """``texts`` through each leg in turn: every leg but the last gives its best translation
    (no glossary, no confidence floor), the last answers with ``options``."""
    between = dataclasses.replace(options, nbest=1, glossary=None, min_confidence=0.0)
    for pair, token in legs[:-1]:
        found = await decode(pair, texts, between, token)
        texts = [hyps[0].text for hyps in found]
    pair, token = legs[-1]
    return await decode(pair, texts, options, token)


async def translate_grouped(
    decode: Decode,
    plans: Sequence[Sequence[Leg]],
    texts: list[str],
    options: SearchOptions,
) -> list[list[Translation]]:
    """Text ``i`` translated through ``plans[i]``: the texts of one plan in one request, the
    plans' requests side by side, the answers in the texts' order."""
    groups: dict[tuple[int, ...], list[int]] = {}
    first: dict[tuple[int, ...], Sequence[Leg]] = {}
    for i, plan in enumerate(plans):
        key = tuple(id(pair) for pair, _ in plan)
        groups.setdefault(key, []).append(i)
        first.setdefault(key, plan)
    found = await asyncio.gather(
        *(
            translate_legs(decode, first[key], [texts[i] for i in members], options)
            for key, members in groups.items()
        )
    )
    out: list[list[Translation]] = [[] for _ in texts]
    for members, answers in zip(groups.values(), found, strict=True):
        for i, answer in zip(members, answers, strict=True):
            out[i] = answer
    return out
