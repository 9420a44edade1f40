"""Tokens a search never emits: PAD, and BOS (the decoder's start, never a prediction)."""

from __future__ import annotations

from torch import Tensor

from aiayn.config import SpecialIds


def forbid_specials(log_probs: Tensor, specials: SpecialIds) -> None:
    """Set the (N, V) log-probabilities of the never-emitted tokens to -inf, in place."""
    log_probs[:, specials.pad] = float("-inf")
    if specials.bos != specials.pad:
        log_probs[:, specials.bos] = float("-inf")
