import pytest
import torch

from aiayn.accel import get_profile
from aiayn.config import EOS_ID, PAD_ID
from aiayn.decode import greedy_search

from .scripted import A, B, C, ScriptedDecoder

ENDS_FIRST = {(): {A: 0.9}, (A,): {EOS_ID: 0.9}}
ENDS_SECOND = {(): {B: 0.9}, (B,): {B: 0.9}, (B, B): {EOS_ID: 0.9}}
ENDS_LAST = {(): {C: 0.9}, (C,): {C: 0.9}, (C, C): {C: 0.9}, (C, C, C): {EOS_ID: 0.9}}


class RowCountingDecoder(ScriptedDecoder):
    """Also records how many rows each step was given."""

    def __init__(self, scripts):
        super().__init__(scripts)
        self.rows: list[int] = []

    def step(self, tokens, state, *, normalize=True):
        self.rows.append(tokens.size(0))
        return super().step(tokens, state, normalize=normalize)


@pytest.mark.parametrize(
    ("leave_after", "rows"),
    [
        (0, [3, 3, 2, 1]),  # each sentence leaves as it ends
        (0.5, [3, 3, 3, 1]),  # the first waits (1 wasted row of 3), leaves with the second
    ],
)
def test_ended_sentences_leave_the_batch(profile, leave_after, rows):
    """The ended rows' outputs are ignored while they wait."""
    decoder = RowCountingDecoder({10: ENDS_LAST, 11: ENDS_FIRST, 12: ENDS_SECOND})
    src = torch.tensor([[10, EOS_ID], [11, EOS_ID], [12, EOS_ID]])
    out = greedy_search(decoder, src, argmax=get_profile(profile).argmax, leave_after=leave_after)
    assert out.tolist() == [
        [C, C, C, EOS_ID],
        [A, EOS_ID, PAD_ID, PAD_ID],
        [B, B, EOS_ID, PAD_ID],
    ]
    assert decoder.rows == rows


def test_a_lone_ended_sentence_stays_until_its_rows_cost_enough(profile):
    """One sentence of four ends at step 1: with leave_after 0.5 it leaves once its row has
    been computed twice for nothing (2 >= 0.5 * 4)."""
    scripts = {10: {prefix: {C: 0.9} for prefix in [(C,) * n for n in range(5)]}, 11: ENDS_FIRST}
    scripts[10][(C,) * 5] = {EOS_ID: 0.9}
    decoder = RowCountingDecoder(scripts)
    src = torch.tensor([[10, EOS_ID], [10, EOS_ID], [11, EOS_ID], [10, EOS_ID]])
    out = greedy_search(decoder, src, argmax=get_profile(profile).argmax, leave_after=0.5)
    assert out[2].tolist() == [A, EOS_ID] + [PAD_ID] * 4
    assert out[0].tolist() == [C] * 5 + [EOS_ID]
    assert decoder.rows == [4, 4, 4, 3, 3, 3]


def test_leave_after_out_of_range_is_refused():
    decoder = RowCountingDecoder({10: ENDS_FIRST})
    with pytest.raises(ValueError, match=r"leave_after must be between 0 and 1, got 1\.5"):
        greedy_search(decoder, torch.tensor([[10, EOS_ID]]), leave_after=1.5)


def test_sentences_at_their_maximum_length_leave_the_batch(profile):
    """A sentence stopped by its length limit (source + max_len_b) ends with EOS and leaves,
    while a longer source's sentence goes on."""
    never_ends = {prefix: {C: 0.999} for prefix in [(), (C,), (C, C), (C, C, C), (C,) * 4]}
    decoder = RowCountingDecoder({13: never_ends})
    src = torch.tensor([[13, 13, EOS_ID], [13, EOS_ID, PAD_ID]])
    out = greedy_search(
        decoder, src, max_len_b=1, argmax=get_profile(profile).argmax, leave_after=0
    )
    assert out.tolist() == [[C, C, C, EOS_ID], [C, C, EOS_ID, PAD_ID]]
    assert decoder.rows == [2, 2, 2, 1]
