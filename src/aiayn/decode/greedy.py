"""Greedy decoding: the most probable token at every step, one position at a time.

Shapes: B sentences, S source length, T output length.
"""

from __future__ import annotations

import torch
from torch import Tensor

from aiayn.accel.profiles import ArgmaxFunction, stepper_for
from aiayn.accel.topk import plain_argmax
from aiayn.config import SpecialIds
from aiayn.decode.guards import REPEAT_SPAN, check_guards, looping, output_limits
from aiayn.decode.specials import DEFAULT_SPECIALS, forbid_specials
from aiayn.models.transformer import Transformer
from aiayn.modules.stepper import StepDecoder

LEAVE_AFTER = 0.5  # ended sentences leave once their rows have cost half a step of the batch


# --8<-- [start:greedy_search]
@torch.inference_mode()
def greedy_search(
    decoder: StepDecoder,
    src: Tensor,
    *,
    max_len_b: int = 50,
    max_len: int | None = None,
    specials: SpecialIds = DEFAULT_SPECIALS,
    argmax: ArgmaxFunction = plain_argmax,
    leave_after: float = LEAVE_AFTER,
    log_probs: Tensor | None = None,
    max_len_a: float | None = None,
    repeat_stop: int | None = None,
) -> Tensor:
    """Decode each sentence until it emits EOS or reaches its maximum length. Sentences
    that have ended leave the batch together (``decoder.reorder``), so later steps compute
    only the rows still decoding.

    A reorder copies every remaining row's cache, so ended rows are not dropped one by one:
    they stay (computed, their output ignored) until the rows computed for them since the
    last reorder add up to ``leave_after`` times the batch's rows: many ending at once leave
    at once, a few wait: the trained tiny model translates test2016 with 30 reorders per pass
    instead of 73, 1.1× as fast (``bench/decode.py --model``).

    Args:
        decoder: the model, seen one step at a time.
        src: (B, S) source ids, right-padded with PAD.
        max_len_b: outputs are at most (source length + ``max_len_b``) tokens, EOS included.
        max_len: a fixed maximum instead, for every sentence.
        specials: the ids of PAD (never emitted, fills ended rows), BOS (the first input,
            never emitted) and EOS.
        argmax: how each row's token is picked: ``plain_argmax`` (``Tensor.argmax``), or a
            profile's (``model.profile.argmax``: the same token).
        leave_after: when ended sentences leave the batch (above); 0: as soon as they end.
        log_probs: a (B, T) float tensor (T at least the longest output) that receives each
            output token's log-probability by the model (0 after EOS), as a beam search's
            scores are (PAD and BOS keep their share of the softmax): a translation's
            confidence; None: not computed (a log-sum-exp per row and step saved).
        max_len_a: the length guard (``aiayn.decode.guards.output_limits``): outputs are
            also at most ceil(``max_len_a`` × source length) + a margin; None: off.
        repeat_stop: the repetition stop: a hypothesis ending in this many consecutive
            copies of an n-gram may only end next (``aiayn.decode.guards.looping``); None: off.

    Returns:
        (B, T) output ids without BOS; each row ends with EOS, then PAD.
    """
    if not 0 <= leave_after <= 1:
        raise ValueError(f"leave_after must be between 0 and 1, got {leave_after}")
    check_guards(max_len_a, repeat_stop)
    b, device = src.size(0), src.device
    limit = _limits(src, specials, max_len, max_len_b, max_len_a)  # (B,)
    out = torch.full((b, int(limit.max())), specials.pad, dtype=torch.long, device=device)
    state = decoder.start(src)
    active = torch.arange(b, device=device)  # (A,) sentences in the batch, A ≤ B
    token = torch.full((b,), specials.bos, dtype=torch.long, device=device)  # (A,)
    ended = torch.zeros(b, dtype=torch.bool, device=device)  # (A,)
    waste = 0  # rows computed for ended sentences since the batch last changed
    for step in range(out.size(1)):
        scores, state = decoder.step(token[:, None], state, normalize=False)  # (A, V)
        total = None if log_probs is None else scores.float().logsumexp(dim=1)  # (A,)
        forbid_specials(scores, specials)
        must_end = step + 1 >= limit[active]  # (A,)
        if repeat_stop is not None and step:
            history = out[active, max(0, step - repeat_stop * REPEAT_SPAN) : step]  # (A, t)
            must_end |= looping(history, repeat_stop)
        token = argmax(scores).masked_fill(must_end, specials.eos)  # (A,)
        out[active, step] = token.masked_fill_(ended, specials.pad)
        if total is not None:
            chosen = scores.gather(1, token[:, None]).squeeze(1).float()  # (A,)
            log_probs[active, step] = (chosen - total).masked_fill_(ended, 0.0)
        ended |= token == specials.eos
        n_ended = int(ended.sum())
        if n_ended == len(active):
            return out[:, : step + 1]  # (B, T)
        waste += n_ended
        if n_ended and waste >= leave_after * len(active):
            kept = (~ended).nonzero().squeeze(1)  # (A',)
            active, token, ended, waste = active[kept], token[kept], ended[kept], 0
            state = decoder.reorder(state, kept, sentences=kept)
    return out  # (B, T)


# --8<-- [end:greedy_search]
def _limits(
    src: Tensor, specials: SpecialIds, max_len: int | None, max_len_b: int, max_len_a: float | None
) -> Tensor:
    """(B,) the longest output of each (B, S) source sentence: ``max_len`` for all, or what
    the length guards allow (``output_limits``)."""
    if max_len is not None:
        return torch.full((src.size(0),), max_len, device=src.device)
    src_lengths = (src != specials.pad).sum(dim=1)  # (B,)
    return output_limits(src_lengths, max_len_b=max_len_b, max_len_a=max_len_a)


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
        argmax=model.profile.argmax,
    )
