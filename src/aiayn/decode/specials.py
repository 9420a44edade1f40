"""Tokens a search never emits: PAD, and BOS (the decoder's start, never a prediction)."""

from __future__ import annotations

from torch import Tensor

from aiayn.config import BOS_ID, PAD_ID

NEVER_EMITTED = (PAD_ID, BOS_ID)


def forbid_specials(log_probs: Tensor) -> None:
    """Set the (N, V) log-probabilities of the never-emitted tokens to -inf, in place."""
    for token in NEVER_EMITTED:
        log_probs[:, token] = float("-inf")
