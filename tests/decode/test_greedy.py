import torch

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


def test_ended_sentences_leave_the_batch(profile):
    decoder = RowCountingDecoder({10: ENDS_LAST, 11: ENDS_FIRST, 12: ENDS_SECOND})
    src = torch.tensor([[10, EOS_ID], [11, EOS_ID], [12, EOS_ID]])
    out = greedy_search(decoder, src, profile=profile)
    assert out.tolist() == [
        [C, C, C, EOS_ID],
        [A, EOS_ID, PAD_ID, PAD_ID],
        [B, B, EOS_ID, PAD_ID],
    ]
    assert decoder.rows == [3, 3, 2, 1]


def test_sentences_at_their_maximum_length_leave_the_batch(profile):
    """A sentence stopped by its length limit (source + max_len_b) ends with EOS and leaves,
    while a longer source's sentence goes on."""
    never_ends = {prefix: {C: 0.999} for prefix in [(), (C,), (C, C), (C, C, C), (C,) * 4]}
    decoder = RowCountingDecoder({13: never_ends})
    src = torch.tensor([[13, 13, EOS_ID], [13, EOS_ID, PAD_ID]])
    out = greedy_search(decoder, src, max_len_b=1, profile=profile)
    assert out.tolist() == [[C, C, C, EOS_ID], [C, C, EOS_ID, PAD_ID]]
    assert decoder.rows == [2, 2, 2, 1]
