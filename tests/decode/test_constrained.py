"""Lexically constrained beam search against a scripted decoder with hand-set probabilities."""

import math

import pytest
import torch

from aiayn.accel import get_profile
from aiayn.config import EOS_ID
from aiayn.decode import beam_search
from aiayn.decode.constrained import _allocate, constrained_beam_search

from .scripted import A, B, C, D, ScriptedDecoder

# Unconstrained, the best is [A]; D is unlikely everywhere, C D a likely pair after B.
PREFERS_A = {
    (): {A: 0.7, B: 0.2},
    (A,): {EOS_ID: 0.9},
    (B,): {C: 0.6, EOS_ID: 0.3},
    (B, C): {D: 0.8},
    (B, C, D): {EOS_ID: 0.9},
    (D,): {EOS_ID: 0.9},
    (A, D): {EOS_ID: 0.9},
    (C,): {D: 0.9},
    (C, D): {EOS_ID: 0.9},
}


def _src(*sentences):
    return torch.tensor([[s, 3] for s in sentences])


def _search(decoder, src, constraints, profile, **kwargs):
    return constrained_beam_search(
        decoder, src, constraints, extensions=get_profile(profile).extensions, **kwargs
    )


def test_without_constraints_it_is_the_beam_search(profile):
    decoder = ScriptedDecoder({10: PREFERS_A})
    kwargs = {"beam": 3, "alpha": 0.6, "nbest": 2}
    plain = beam_search(decoder, _src(10), extensions=get_profile(profile).extensions, **kwargs)
    constrained = _search(decoder, _src(10), [[]], profile, **kwargs)
    assert [[h.tokens for h in s] for s in constrained] == [[h.tokens for h in s] for s in plain]
    assert constrained[0][0].score == pytest.approx(plain[0][0].score)


def test_a_two_token_constraint_is_met_where_the_model_scores_it_best(profile):
    decoder = ScriptedDecoder({10: PREFERS_A})
    [[best]] = _search(decoder, _src(10), [[[C, D]]], profile, beam=4, alpha=None)
    assert best.tokens == [B, C, D]  # not [A, C, D] nor [C, D]: B C D scores best
    assert best.log_prob == pytest.approx(math.log(0.2 * 0.6 * 0.8 * 0.9))


def test_every_constraint_of_each_sentence_is_met_and_sentences_do_not_mix(profile):
    decoder = ScriptedDecoder({10: PREFERS_A, 11: PREFERS_A})
    found = _search(decoder, _src(10, 11, 10), [[[D]], [], [[C], [A]]], profile, beam=4)
    assert D in found[0][0].tokens
    assert found[1][0].tokens == [A]
    assert {A, C} <= set(found[2][0].tokens)


def test_a_constraint_out_of_reach_still_gives_a_translation_ranked_last(profile):
    decoder = ScriptedDecoder({10: PREFERS_A})
    [hyps] = _search(decoder, _src(10), [[[D, D, D, D]]], profile, beam=2, max_len_b=2)
    assert hyps and len(hyps[0].tokens) <= 3  # source length 2 + 2, EOS included


def test_a_repeated_first_token_restarts_the_match(profile):
    script = {(): {C: 0.9}, (C,): {C: 0.9}, (C, C): {D: 0.9}, (C, C, D): {EOS_ID: 0.9}}
    decoder = ScriptedDecoder({12: script})
    [[best]] = _search(decoder, _src(12), [[[C, D]]], profile, beam=3, alpha=None)
    assert best.tokens == [C, C, D]


def test_beams_are_dealt_round_robin_over_banks():
    scores = torch.tensor([[-1.0, -2.0, -3.0, -9.0, -8.0, float("-inf")]])
    bank = torch.tensor([[0, 0, 0, 1, 1, 2]])
    picked = _allocate(scores, bank, 4)[0].tolist()
    assert picked == [4, 0, 3, 1]  # bank 1's best, bank 0's best, then the second of each


def test_the_number_of_constraint_lists_must_match_the_batch():
    with pytest.raises(ValueError, match="constraint lists"):
        constrained_beam_search(ScriptedDecoder({10: PREFERS_A}), _src(10), [[], []])


def test_no_glued_token_right_after_a_constraint(profile):
    """A token that continues a word (``glued``) never follows a completed constraint, so
    the term stays a word of its own; elsewhere it may come."""
    script = {(): {C: 0.9}, (C,): {D: 0.9}, (C, D): {EOS_ID: 0.9}, (C, A): {EOS_ID: 0.9}}
    decoder = ScriptedDecoder({12: script})
    [[free]] = _search(decoder, _src(12), [[[C]]], profile, beam=3, alpha=None)
    assert free.tokens == [C, D]
    glued = torch.zeros(700, dtype=torch.bool)
    glued[D] = True
    [[kept_apart]] = _search(decoder, _src(12), [[[C]]], profile, beam=3, alpha=None, glued=glued)
    assert kept_apart.tokens[:1] == [C] and kept_apart.tokens[1:2] != [D]


def test_no_closing_token_while_a_constraint_is_to_come(profile):
    """A sentence-ending token (``closing``: its full stop, D here) is not written while a
    constraint is still to come, so the term lands inside the sentence, not after its end;
    where the constraint itself holds that token, it may."""
    script = {
        (): {A: 0.9, C: 0.05},
        (A,): {D: 0.9, C: 0.05},  # A then the full stop
        (A, D): {C: 0.5, EOS_ID: 0.4},  # the term after the full stop
        (A, D, C): {EOS_ID: 0.9},
        (A, C): {D: 0.9},  # the term inside the sentence
        (A, C, D): {EOS_ID: 0.9},
    }
    decoder = ScriptedDecoder({12: script})
    [[after]] = _search(decoder, _src(12), [[[C]]], profile, beam=3, alpha=None)
    assert after.tokens == [A, D, C]
    closing = torch.zeros(700, dtype=torch.bool)
    closing[D] = True
    [[inside]] = _search(decoder, _src(12), [[[C]]], profile, beam=3, alpha=None, closing=closing)
    assert inside.tokens == [A, C, D]
    [[held]] = _search(decoder, _src(12), [[[D, C]]], profile, beam=3, alpha=None, closing=closing)
    assert held.tokens == [A, D, C]  # the constraint's own full stop is allowed
