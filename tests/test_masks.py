import torch

from aiayn import masks


def test_padding_mask_marks_real_tokens():
    tokens = torch.tensor([[5, 6, 0], [7, 0, 0]])
    mask = masks.padding_mask(tokens, pad_id=0)
    assert mask.shape == (2, 1, 1, 3)
    assert mask.dtype == torch.bool
    assert mask[:, 0, 0].tolist() == [[True, True, False], [True, False, False]]


def test_causal_mask_is_lower_triangular():
    mask = masks.causal_mask(4)
    assert mask.shape == (1, 1, 4, 4)
    assert torch.equal(mask[0, 0], torch.ones(4, 4, dtype=torch.bool).tril())


def test_causal_mask_with_offset_sees_all_cached_positions():
    mask = masks.causal_mask(2, offset=3)[0, 0]
    assert mask.shape == (2, 5)
    assert mask.tolist() == [[True] * 4 + [False], [True] * 5]


def test_decoder_self_mask_combines_causal_and_padding():
    tgt = torch.tensor([[2, 5, 0]])
    mask = masks.decoder_self_mask(tgt, pad_id=0)[0, 0]
    assert mask.tolist() == [[True, False, False], [True, True, False], [True, True, False]]
