import math

import pytest
import torch

from aiayn.accel import get_profile
from aiayn.config import EOS_ID
from aiayn.decode import beam_search, greedy_search, length_penalty

from .scripted import A, B, C, ScriptedDecoder

GREEDY_TRAP = {
    (): {A: 0.6, B: 0.4},
    (A,): {A: 0.36, B: 0.34, EOS_ID: 0.30},
    (A, A): {EOS_ID: 1.0},
    (B,): {EOS_ID: 0.9},
}
SHORT_OR_LONG = {
    (): {A: 0.5, B: 0.5},
    (A,): {EOS_ID: math.exp(-0.3)},
    (B,): {B: 0.8},
    (B, B): {B: 0.8},
    (B, B, B): {EOS_ID: 0.9},
}
EOS_AT_EVERY_STEP = {
    (): {EOS_ID: 0.3, A: 0.4, B: 0.3},
    (A,): {EOS_ID: 0.45, A: 0.55},
    (A, A): {EOS_ID: 1.0},
    (B,): {EOS_ID: 0.9},
}


def _src(*sentences):
    return torch.tensor([[s, 3] for s in sentences])  # script id, then EOS


def test_beam_finds_what_greedy_misses(profile):
    decoder = ScriptedDecoder({10: GREEDY_TRAP})
    greedy = greedy_search(decoder, _src(10))
    assert greedy[0].tolist() == [A, A, EOS_ID]
    [[best]] = beam_search(
        decoder, _src(10), beam=2, alpha=None, extensions=get_profile(profile).extensions
    )
    assert best.tokens == [B]
    assert best.log_prob == pytest.approx(math.log(0.4 * 0.9))


def test_length_penalty_changes_the_winner(profile):
    decoder = ScriptedDecoder({11: SHORT_OR_LONG})
    [[raw]] = beam_search(
        decoder, _src(11), beam=2, alpha=None, extensions=get_profile(profile).extensions
    )
    assert raw.tokens == [A]
    [[penalised]] = beam_search(
        decoder, _src(11), beam=2, alpha=1.0, extensions=get_profile(profile).extensions
    )
    assert penalised.tokens == [B, B, B]
    expected = math.log(0.5 * 0.8 * 0.8 * 0.9)
    assert penalised.log_prob == pytest.approx(expected)
    assert penalised.score == pytest.approx(expected / ((5 + 4) / 6))


@pytest.mark.parametrize(
    ("stopping", "tokens", "steps"),
    [("exact", [B, B, B], 4), ("beams", [A], 3), ("heuristic", [A], 3)],
)
def test_stopping_rules(profile, stopping, tokens, steps):
    """[A] ends first; [B, B, B] scores better in the end (α = 1). After step 3 the pool
    holds K = 2 hypotheses ("beams" stops) and [B, B, B] scored at its current length does
    not beat [A] ("heuristic" stops); only "exact" goes on and finds it."""
    decoder = ScriptedDecoder({11: SHORT_OR_LONG})
    [[best]] = beam_search(
        decoder,
        _src(11),
        beam=2,
        alpha=1.0,
        extensions=get_profile(profile).extensions,
        stopping=stopping,
    )
    assert best.tokens == tokens
    assert decoder.steps == steps


def test_an_unknown_stopping_rule_is_refused():
    with pytest.raises(ValueError, match="stopping must be one of"):
        beam_search(ScriptedDecoder({11: SHORT_OR_LONG}), _src(11), stopping="soon")


def test_eos_at_different_steps_and_nbest_order(profile):
    decoder = ScriptedDecoder({12: EOS_AT_EVERY_STEP})
    [hyps] = beam_search(
        decoder, _src(12), beam=3, alpha=None, nbest=3, extensions=get_profile(profile).extensions
    )
    assert [h.tokens for h in hyps] == [[], [B], [A, A]]
    assert [h.log_prob for h in hyps] == pytest.approx(
        [math.log(0.3), math.log(0.27), math.log(0.4 * 0.55)]
    )
    assert hyps[0].score >= hyps[1].score >= hyps[2].score


def test_raw_scores_stop_as_soon_as_no_live_beam_can_win(profile):
    decoder = ScriptedDecoder({11: SHORT_OR_LONG})
    beam_search(decoder, _src(11), beam=2, alpha=None, extensions=get_profile(profile).extensions)
    assert decoder.steps == 3  # after step 3 the best live beam is below the finished [A]


def test_sentences_in_one_batch_do_not_interact(profile):
    scripts = {10: GREEDY_TRAP, 11: SHORT_OR_LONG, 12: EOS_AT_EVERY_STEP}
    together = beam_search(
        ScriptedDecoder(scripts),
        _src(10, 11, 12),
        beam=3,
        alpha=1.0,
        nbest=2,
        extensions=get_profile(profile).extensions,
    )
    for i, s in enumerate((10, 11, 12)):
        alone = beam_search(
            ScriptedDecoder(scripts),
            _src(s),
            beam=3,
            alpha=1.0,
            nbest=2,
            extensions=get_profile(profile).extensions,
        )
        assert together[i] == alone[0]


def test_maximum_length_forces_eos(profile):
    """EOS has next to no probability, so only the maximum length ends the hypotheses."""
    script = _Always({C: 0.999, EOS_ID: 1e-30})
    [[hyp]] = beam_search(
        ScriptedDecoder({13: script}),
        _src(13),
        beam=2,
        alpha=1.0,
        max_len_b=5,
        extensions=get_profile(profile).extensions,
    )
    assert hyp.tokens == [C] * 6  # + EOS: source length (with EOS) + max_len_b tokens
    out = greedy_search(ScriptedDecoder({13: script}), _src(13), max_len_b=5)
    assert out[0].tolist() == [C] * 6 + [EOS_ID]


class _Always(dict):
    """A script that answers the same distribution for every prefix."""

    def __init__(self, probs):
        super().__init__()
        self.probs = probs

    def get(self, prefix, default=None):
        return self.probs


def test_length_penalty_formula():
    assert length_penalty(7, 0.6).item() == pytest.approx((12 / 6) ** 0.6)
    assert length_penalty(7, None).item() == 1.0
    with pytest.raises(ValueError, match="nbest"):
        beam_search(ScriptedDecoder({10: GREEDY_TRAP}), _src(10), beam=2, nbest=3)
