"""What a ``Translator`` refuses, each as one ``TranslationError`` line: lines that are not
text, options that are not a ``SearchOptions``, HTML too deep or too large, and a model
whose weights overflow."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import torch

from aiayn.checks import lone_surrogate
from aiayn.errors import AiaynError
from aiayn.models.transformer import Transformer
from aiayn.search_options import SearchOptions
from aiayn.text.html import HtmlError, HtmlText


class TranslationError(AiaynError, ValueError):
    """Input that cannot be translated under the chosen options (e.g. an over-long line)."""


@torch.inference_mode()
def check_computes(model: Transformer, directory: str | Path) -> None:
    """Refuse a model whose finite weights still compute NaN or an infinity (values so large
    that they overflow): it would translate every line to unknown words.

    Raises:
        TranslationError: naming the directory."""
    device = next(model.parameters()).device
    specials = model.specials
    src = torch.tensor([[specials.eos]], device=device)  # (1, 1): the shortest source
    tgt = torch.tensor([[specials.bos]], device=device)  # (1, 1)
    if not bool(torch.isfinite(model(src, tgt)).all()):
        raise TranslationError(
            f"{directory}: the model computes non-finite values (its weights overflow: "
            "damaged, or trained until it diverged); it cannot translate"
        )


def html_documents(lines: Sequence[str]) -> list[HtmlText]:
    """Each line parsed as an HTML document.

    Raises:
        TranslationError: a document too deep or too large (``aiayn.text.html``)."""
    documents = []
    for n, line in enumerate(lines, 1):
        try:
            documents.append(HtmlText(line))
        except HtmlError as e:
            raise TranslationError(f"line {n}: {e}") from None
    return documents


def check_lines(lines: Sequence[str]) -> None:
    if isinstance(lines, str | bytes):
        raise TranslationError(
            "translate() takes a list of lines, not one string: pass [text] to translate one"
        )
    if not isinstance(lines, Sequence):
        raise TranslationError(f"translate() takes a list of lines, not {type(lines).__name__}")
    for n, line in enumerate(lines, 1):
        if not isinstance(line, str):
            raise TranslationError(f"line {n}: expected text (str), got {type(line).__name__}")
        at = lone_surrogate(line)
        if at is not None:
            raise TranslationError(
                f"line {n}: a lone surrogate (U+{ord(line[at]):04X} at character {at + 1}), "
                "not valid Unicode"
            )


def check_options(options: SearchOptions) -> None:
    if not isinstance(options, SearchOptions):
        raise TranslationError(
            f"options: expected a SearchOptions, got {type(options).__name__} "
            "(write SearchOptions(beam=4, ...))"
        )
