"""Tokens a search never emits: PAD, and BOS (the decoder's start, never a prediction)."""

from __future__ import annotations

from torch import Tensor

from aiayn.config import SpecialIds

DEFAULT_SPECIALS = SpecialIds()  # the ids a search assumes unless told the model's


def forbid_specials(scores: Tensor, specials: SpecialIds) -> None:
    """Set the (N, V) scores (log-probabilities or logits) of the never-emitted tokens to
    -inf, in place."""
    scores[:, specials.pad] = float("-inf")
    if specials.bos != specials.pad:
        scores[:, specials.bos] = float("-inf")
