"""Greedy decoding: the most probable token at every step, one position at a time.

Shapes: B sentences, S source length, T output length.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import Tensor

from aiayn.accel import DEFAULT_PROFILE
from aiayn.accel.topk import row_argmax
from aiayn.config import SpecialIds
from aiayn.decode.specials import forbid_specials
from aiayn.decode.stepper import StepDecoder, stepper_for
from aiayn.models.transformer import Transformer

DEFAULT_SPECIALS = SpecialIds()


def plain_argmax(x: Tensor) -> Tensor:
    """(N, V) -> (N,): the first column of each row's maximum."""
    return x.argmax(dim=1)


ARGMAX: dict[str, Callable[[Tensor], Tensor]] = {"reference": plain_argmax, "fast": row_argmax}


@torch.inference_mode()
def greedy_search(
    decoder: StepDecoder,
    src: Tensor,
    *,
    max_len_b: int = 50,
    max_len: int | None = None,
    specials: SpecialIds = DEFAULT_SPECIALS,
    profile: str = DEFAULT_PROFILE,
) -> Tensor:
    """Decode each sentence until it emits EOS or reaches its maximum length; a sentence
    that has ended leaves the batch (``decoder.reorder``), so later steps compute only the
    rows still decoding.

    Args:
        decoder: the model, seen one step at a time.
        src: (B, S) source ids, right-padded with PAD.
        max_len_b: outputs are at most (source length + ``max_len_b``) tokens, EOS included.
        max_len: a fixed maximum instead, for every sentence.
        specials: the ids of PAD (never emitted, fills ended rows), BOS (the first input,
            never emitted) and EOS.
        profile: ``reference`` picks each row's token with ``torch.argmax``; ``fast`` with
            ``aiayn.accel.topk.row_argmax`` (the same token).

    Returns:
        (B, T) output ids without BOS; each row ends with EOS, then PAD.
    """
    argmax = ARGMAX[profile]
    b, device = src.size(0), src.device
    limit = (
        (src != specials.pad).sum(dim=1) + max_len_b
        if max_len is None
        else torch.full((b,), max_len, device=device)
    )  # (B,)
    out = torch.full((b, int(limit.max())), specials.pad, dtype=torch.long, device=device)
    state = decoder.start(src)
    active = torch.arange(b, device=device)  # (A,) sentences still decoding, A ≤ B
    token = torch.full((b,), specials.bos, dtype=torch.long, device=device)  # (A,)
    for step in range(out.size(1)):
        scores, state = decoder.step(token[:, None], state, normalize=False)  # (A, V)
        forbid_specials(scores, specials)
        token = argmax(scores).masked_fill(step + 1 >= limit[active], specials.eos)  # (A,)
        out[active, step] = token
        ended = token == specials.eos  # (A,)
        if ended.all():
            return out[:, : step + 1]  # (B, T)
        if ended.any():  # finished sentences leave the batch, as in beam search
            kept = (~ended).nonzero().squeeze(1)  # (A',)
            active, token = active[kept], token[kept]
            state = decoder.reorder(state, kept, sentences=kept)
    return out  # (B, T)


def greedy_decode(
    model: Transformer, src: Tensor, *, max_len_b: int = 50, max_len: int | None = None
) -> Tensor:
    """``greedy_search`` through a Transformer's KV cache."""
    return greedy_search(
        stepper_for(model),
        src,
        max_len_b=max_len_b,
        max_len=max_len,
        specials=model.specials,
        profile=model.profile.name,
    )
