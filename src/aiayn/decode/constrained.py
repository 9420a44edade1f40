"""Lexically constrained beam search: every hypothesis returned holds each of its sentence's
constraints (token sequences: a glossary's target terms, protected spans' sentinels), placed
where the model scores them best.

Dynamic beam allocation (Post & Vilar, 2018), batched over sentences and beams as in Hu et
al. (2019): each step's candidates are the K·2 best extensions of the sentence's beams, plus,
for every beam, the next token of each constraint it has not met and its own best token.
Candidates are grouped into banks by how many constraint tokens they have met, and the K
beams are dealt round-robin over the banks (best first in each, the fullest bank first in
each round), so hypotheses that have met more constraints are kept alongside the best
scoring ones. A hypothesis may end (EOS) only once it has met all its constraints; at the
maximum length it ends regardless and ranks below every hypothesis that met them. The KV
cache and the finished-hypothesis pool are the plain beam search's (``aiayn.decode.beam``).

Shapes: B sentences, A ≤ B of them still decoding, K beam size, W live beams per sentence,
V vocabulary, C constraints per sentence (padded), L tokens per constraint (padded), M
candidates per sentence (2K + W·(C + 1)).
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import Tensor

from aiayn.accel.profiles import ExtensionsFunction
from aiayn.accel.topk import plain_extensions
from aiayn.config import SpecialIds
from aiayn.decode.beam import (
    NEG_INF,
    FinishedPool,
    Hypothesis,
    check_arguments,
    length_penalty,
    restrict_rows,
    sentence_limits,
    sentences_done,
)
from aiayn.decode.specials import DEFAULT_SPECIALS
from aiayn.modules.stepper import StepDecoder

Constraints = Sequence[Sequence[Sequence[int]]]  # per sentence, its token sequences


class _Progress:
    """Each row's progress through its sentence's constraints: ``met`` (N, C) and
    ``matched`` (N, C), the tokens of an unmet constraint that the row's last tokens match."""

    def __init__(self, constraints: Constraints, device: torch.device):
        b = len(constraints)
        c = max(1, max(len(s) for s in constraints))
        length = max([1] + [len(t) for s in constraints for t in s])
        self.tokens = torch.full((b, c, length), -1, dtype=torch.long, device=device)  # (B,C,L)
        for i, sentence in enumerate(constraints):
            for j, term in enumerate(sentence):
                self.tokens[i, j, : len(term)] = torch.as_tensor(term, dtype=torch.long)
        self.lengths = (self.tokens >= 0).sum(dim=2)  # (B, C): 0 for padding, always met
        self.total = self.lengths.sum(dim=1)  # (B,) constraint tokens of each sentence

    def start(self) -> tuple[Tensor, Tensor]:
        """(B, C) met and matched of each sentence's first (only) beam."""
        return self.lengths == 0, torch.zeros_like(self.lengths)

    def advance(
        self, sentences: Tensor, met: Tensor, matched: Tensor, tokens: Tensor
    ) -> tuple[Tensor, Tensor, Tensor]:
        """Met, matched and bank (constraint tokens met) after appending ``tokens``.

        Args:
            sentences: (A,) the sentences.
            met, matched: (A, M, C) the candidates' rows' progress.
            tokens: (A, M) the candidates' tokens.

        Returns:
            (A, M, C) met, (A, M, C) matched, (A, M) bank.
        """
        own = self.tokens[sentences]  # (A, C, L)
        lengths = self.lengths[sentences][:, None, :]  # (A, 1, C)
        a, m, c = met.shape
        index = matched.clamp(max=own.size(2) - 1)  # (A, M, C)
        expected = own[:, None].expand(a, m, c, own.size(2)).gather(3, index[..., None])
        hit = (expected.squeeze(3) == tokens[:, :, None]) & ~met  # (A, M, C)
        first = own[:, None, :, 0] == tokens[:, :, None]  # (A, M, C): a constraint starts again
        matched = torch.where(hit, matched + 1, first.long())
        met = met | (hit & (matched == lengths))
        matched = matched.masked_fill(met, 0)
        bank = torch.where(met, lengths, matched).sum(dim=2)  # (A, M)
        return met, matched, bank


@torch.inference_mode()
def constrained_beam_search(
    decoder: StepDecoder,
    src: Tensor,
    constraints: Constraints,
    *,
    beam: int = 5,
    alpha: float | None = 0.6,
    max_len_b: int = 50,
    nbest: int = 1,
    extensions: ExtensionsFunction = plain_extensions,
    specials: SpecialIds = DEFAULT_SPECIALS,
    stopping: str = "exact",
    max_len_a: float | None = None,
    repeat_stop: int | None = None,
    glued: Tensor | None = None,
    closing: Tensor | None = None,
) -> list[list[Hypothesis]]:
    """``aiayn.decode.beam.beam_search`` whose hypotheses hold each sentence's
    ``constraints`` (its token sequences, without BOS/EOS; a sentence may have none),
    with the same guards (``max_len_a``, ``repeat_stop``). ``glued``: (V,) the tokens that
    continue a word (a subword without its word-start mark), never emitted right after a
    constraint, so a term stays a word of its own (``Mann``, not ``Mannschaft``).
    ``closing``: (V,) the tokens that end a sentence (``.``, ``!``), none while a constraint
    is to come (but its own next token): a term goes inside the sentence, not after it.

    Returns, for each sentence, ``nbest`` hypotheses, best first: those holding every
    constraint before any that reached the maximum length without them.
    """
    if len(constraints) != src.size(0):
        raise ValueError(f"{len(constraints)} constraint lists for {src.size(0)} sentences")
    check_arguments(beam, nbest, alpha, stopping, max_len_a, repeat_stop)
    device = src.device
    b, k = src.size(0), beam
    progress = _Progress(constraints, device)
    max_len = sentence_limits(src, specials, max_len_b, max_len_a)  # (B,)
    longest = int(max_len.max())
    state = decoder.start(src)
    active = torch.arange(b, device=device)  # (A,)
    tokens = torch.full((b, 1), specials.bos, dtype=torch.long, device=device)  # (A·W, 1)
    alive = torch.zeros((b, 1), device=device)  # (A, W)
    met, matched = progress.start()  # (A·W, C) each
    ended = torch.zeros(b, dtype=torch.bool, device=device)  # (A·W,) a constraint just met
    pool = FinishedPool(b, k, longest + 2, device, specials)
    best_possible_lp = length_penalty(max_len, alpha).to(device)  # (B,)
    for step in range(longest):
        a, width = alive.shape
        log_probs, state = decoder.step(tokens[:, -1:], state)  # (A·W, V)
        at_max = restrict_rows(log_probs, tokens, max_len[active], step, repeat_stop, specials)
        wanted = _next_tokens(progress.tokens[active], met, matched)  # (A·W, C)
        _hold_back(log_probs, ~met.all(dim=1) & ~at_max, ended, wanted, glued, closing, specials)
        beams, new, scores = _candidates(
            log_probs, alive, met, matched, progress.tokens[active], 2 * k, extensions
        )  # (A, M) each
        rows = beams + width * torch.arange(a, device=device)[:, None]  # (A, M)
        c = met.size(1)
        before = met[rows.view(-1)].view(a, -1, c)  # (A, M, C)
        cand_met, cand_matched, bank = progress.advance(
            active, before, matched[rows.view(-1)].view(a, -1, c), new
        )
        is_eos = new == specials.eos
        _finish(pool, active, tokens, rows, scores, is_eos, cand_met, step, alpha)
        pick = _allocate(scores.masked_fill(is_eos, NEG_INF), bank, k)  # (A, K)
        alive = scores.gather(1, pick)  # (A, K)
        done = sentences_done(stopping, alive, pool, active, best_possible_lp, step, alpha, nbest)
        if done.all():
            break
        chosen_rows, chosen_tokens = rows.gather(1, pick), new.gather(1, pick)  # (A, K) each
        met = cand_met.gather(1, pick[..., None].expand(-1, -1, c))  # (A, K, C)
        matched = cand_matched.gather(1, pick[..., None].expand(-1, -1, c))  # (A, K, C)
        ended = (cand_met & ~before).any(dim=2).gather(1, pick)  # (A, K)
        kept = (~done).nonzero().squeeze(1) if done.any() else None  # (A',)
        if kept is not None:
            active, alive, chosen_rows, chosen_tokens, met, matched, ended = (
                t[kept] for t in (active, alive, chosen_rows, chosen_tokens, met, matched, ended)
            )
        chosen_rows = chosen_rows.view(-1)  # (A'·K,)
        tokens = torch.cat([tokens[chosen_rows], chosen_tokens.view(-1, 1)], dim=1)
        met, matched, ended = met.view(-1, c), matched.view(-1, c), ended.view(-1)  # (A'·K, ·)
        state = decoder.reorder(state, chosen_rows, sentences=kept)
    return pool.results(nbest)


def _finish(
    pool: FinishedPool,
    active: Tensor,
    tokens: Tensor,
    rows: Tensor,
    scores: Tensor,
    is_eos: Tensor,
    met: Tensor,
    step: int,
    alpha: float | None,
) -> None:
    """The (A, M) candidates that end here (EOS, a finite score) into ``pool``; those that
    have not met all their (A, M, C) constraints rank below every one that has."""
    finished = is_eos & torch.isfinite(scores)
    if finished.any():
        prefixes = tokens[rows.view(-1)].view(rows.size(0), rows.size(1), -1)  # (A, M, t+1)
        unmet = ~met.all(dim=2)  # (A, M)
        pool.add(active, prefixes, scores, finished, length=step + 1, alpha=alpha, demote=unmet)


def _hold_back(
    log_probs: Tensor,
    unmet: Tensor,
    ended: Tensor,
    wanted: Tensor,
    glued: Tensor | None,
    closing: Tensor | None,
    specials: SpecialIds,
) -> None:
    """No EOS for the (A·W,) ``unmet`` rows (a constraint still to hold), nor any of the
    (V,) ``closing`` tokens but those that are the next token of one of their unmet
    constraints ((A·W, C) ``wanted``, -1: none); none of the (V,) ``glued`` tokens right
    after a constraint in the (A·W,) ``ended`` rows."""
    log_probs[unmet, specials.eos] = NEG_INF
    if glued is not None:
        log_probs.masked_fill_(ended[:, None] & glued, NEG_INF)  # (A·W, V)
    if closing is not None:
        ban = unmet[:, None] & closing  # (A·W, V)
        rows, slots = (wanted >= 0).nonzero(as_tuple=True)
        ban[rows, wanted[rows, slots]] = False
        log_probs.masked_fill_(ban, NEG_INF)


def _next_tokens(own: Tensor, met: Tensor, matched: Tensor) -> Tensor:
    """(A·W, C) each row's next token of each constraint, -1 where it is met (or padding).

    Args:
        own: (A, C, L) the sentences' constraint tokens (-1: padding); met, matched: (A·W, C).
    """
    own_rows = own.repeat_interleave(met.size(0) // own.size(0), dim=0)  # (A·W, C, L)
    index = matched.clamp(max=own.size(2) - 1)[..., None]  # (A·W, C, 1)
    return own_rows.gather(2, index).squeeze(2).masked_fill(met, -1)


def _candidates(
    log_probs: Tensor,
    alive: Tensor,
    met: Tensor,
    matched: Tensor,
    own: Tensor,
    n: int,
    extensions: ExtensionsFunction,
) -> tuple[Tensor, Tensor, Tensor]:
    """Each sentence's candidates, a (beam, token) pair at most once: the ``n`` best
    extensions, each beam's next token of every unmet constraint, and each beam's best token.

    Args:
        log_probs: (A·W, V); alive: (A, W); met, matched: (A·W, C); own: (A, C, L) the
            sentences' constraint tokens (-1: padding).

    Returns:
        (A, M) beams (0 .. W-1), (A, M) tokens, (A, M) log-probabilities (-inf: no candidate).
    """
    a, width = alive.shape
    top_logp, top_beam, top_token = extensions(log_probs, alive, n)  # (A, n) each
    nxt = _next_tokens(own, met, matched)  # (A·W, C)
    extra = torch.cat([nxt, log_probs.argmax(dim=1, keepdim=True)], dim=1)  # (A·W, C+1)
    valid = extra >= 0
    extra_logp = log_probs.gather(1, extra.clamp(min=0)) + alive.view(-1, 1)  # (A·W, C+1)
    extra_logp = extra_logp.masked_fill(~valid, NEG_INF)
    extra_beam = torch.arange(width, device=alive.device).repeat(a)[:, None].expand_as(extra)
    beams = torch.cat([top_beam, extra_beam.reshape(a, -1)], dim=1)  # (A, M)
    tokens = torch.cat([top_token, extra.clamp(min=0).reshape(a, -1)], dim=1)  # (A, M)
    scores = torch.cat([top_logp, extra_logp.reshape(a, -1)], dim=1)  # (A, M)
    key = beams * log_probs.size(1) + tokens  # (A, M): one per (beam, token)
    order = key.argsort(dim=1, stable=True)  # (A, M)
    sorted_key = key.gather(1, order)
    repeat = torch.zeros_like(sorted_key, dtype=torch.bool)
    repeat[:, 1:] = sorted_key[:, 1:] == sorted_key[:, :-1]
    scores = scores.scatter(1, order, scores.gather(1, order).masked_fill(repeat, NEG_INF))
    return beams, tokens, scores


def _allocate(scores: Tensor, bank: Tensor, k: int) -> Tensor:
    """(A, K) the candidates kept as beams: dealt round-robin over the banks (each bank's
    best first, the bank of most constraint tokens first within a round); candidates at
    -inf come last.

    Args:
        scores: (A, M) candidate log-probabilities (-inf: not a candidate).
        bank: (A, M) constraint tokens each candidate has met.
    """
    a, m = scores.shape
    by_score = scores.argsort(dim=1, descending=True, stable=True)  # (A, M)
    banks = bank.gather(1, by_score)
    by_bank = banks.argsort(dim=1, descending=True, stable=True)  # (A, M): bank, then score
    order = by_score.gather(1, by_bank)  # (A, M) candidate of each position
    sorted_bank = bank.gather(1, order)
    position = torch.arange(m, device=scores.device).expand(a, m)
    starts = torch.ones_like(sorted_bank, dtype=torch.bool)
    starts[:, 1:] = sorted_bank[:, 1:] != sorted_bank[:, :-1]
    first = torch.where(starts, position, 0).cummax(dim=1).values  # (A, M)
    rank = position - first  # (A, M): place within its bank
    top = int(bank.max()) + 1
    key = (rank * top + (top - 1 - sorted_bank)).float()  # round, then fullest bank first
    key = key.masked_fill(~torch.isfinite(scores.gather(1, order)), float("inf"))
    return order.gather(1, key.topk(k, dim=1, largest=False).indices)  # (A, K)
