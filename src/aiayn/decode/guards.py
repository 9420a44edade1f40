"""Decoding guards: what stops a search that runs away on input unlike the training data.

A model given text it never saw (a shouted sentence, another domain) can loop ("Ein WAAAA…")
until the paper's bound (source length + 50). Two guards end such hypotheses early, both
only where a normal translation would not be cut:

- a length guard: outputs of at most ``ceil(a · S) + LENGTH_MARGIN`` tokens (EOS included;
  S the source length with its EOS), where ``a`` is a multiple of the model's target/source
  length ratio on its training data (``TokenizerInfo.length_ratio``);
- a repetition stop: a hypothesis ending in ``copies`` consecutive copies of one n-gram
  (n ≤ ``REPEAT_SPAN``) may only end (EOS) next.

Shapes: B sentences, N rows, t tokens so far.
"""

from __future__ import annotations

import math

import torch
from torch import Tensor

LENGTH_MARGIN = 5  # tokens beyond a · S: a short source may translate to a few more pieces
REPEAT_SPAN = 6  # the longest repeated n-gram the repetition stop looks for
# Hugging Face's generate has no repetition stop: its no_repeat_ngram_size bans any n-gram
# seen before in the output, anywhere. 6 bans the loops the stop ends (a loop of two pieces
# after 4 copies, as the stop) and spares the shorter phrases a caption repeats ("ein Mann")
EXPORT_NO_REPEAT_NGRAM = 6


def output_limits(src_lengths: Tensor, *, max_len_b: int, max_len_a: float | None = None) -> Tensor:
    """(B,) the longest output of each sentence, EOS included: the paper's source length
    + ``max_len_b`` (§6.1), and with ``max_len_a`` at most ``ceil(max_len_a · S)`` +
    ``LENGTH_MARGIN``.

    Args:
        src_lengths: (B,) source lengths S, EOS included.
    """
    limits = src_lengths + max_len_b  # (B,)
    if max_len_a is None:
        return limits
    guarded = torch.ceil(src_lengths.double() * max_len_a).long() + LENGTH_MARGIN  # (B,)
    return torch.minimum(limits, guarded)


def looping(history: Tensor, copies: int, *, span: int = REPEAT_SPAN) -> Tensor:
    """(N,) which rows of the (N, t) output ``history`` end in ``copies`` consecutive copies
    of one n-gram, n ≤ ``span`` ("x y x y x y" is 3 copies of "x y")."""
    n_rows, t = history.shape
    found = torch.zeros(n_rows, dtype=torch.bool, device=history.device)  # (N,)
    for n in range(1, span + 1):
        need = n * copies
        if need > t:
            break
        tail = history[:, t - need :].reshape(n_rows, copies, n)  # (N, copies, n)
        found |= (tail == tail[:, -1:]).flatten(1).all(dim=1)
    return found


def check_guards(max_len_a: float | None, repeat_stop: int | None) -> None:
    """Refuse guard values a search cannot use.

    Raises:
        ValueError: a non-positive or non-finite ``max_len_a``, or ``repeat_stop`` below 2.
    """
    if max_len_a is not None and not (math.isfinite(max_len_a) and max_len_a > 0):
        raise ValueError(f"max_len_a must be a positive finite number, got {max_len_a}")
    if repeat_stop is not None and repeat_stop < 2:
        raise ValueError(f"repeat_stop must be at least 2 copies, got {repeat_stop}")
