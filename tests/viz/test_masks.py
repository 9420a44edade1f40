"""The masks picture shows the masks the model applies, cell for cell."""

import numpy as np
import torch

from aiayn.viz import batch_masks, masks_figure, save_figure

from .test_plots import _check_image

PAD = 0


def test_batch_masks_are_padding_and_causality():
    src = torch.tensor([[5, 6, 7, 8], [5, 6, PAD, PAD]])  # (B, S)
    tgt = torch.tensor([[1, 9, 10], [1, 9, PAD]])  # (B, T), position 0 the start
    encoder, decoder, cross = batch_masks(src, tgt, pad_id=PAD)
    assert encoder.shape == (2, 4, 4) and decoder.shape == (2, 3, 3) and cross.shape == (2, 3, 4)
    assert encoder[0].all() and cross[0].all()
    assert not encoder[1][:, 2:].any() and encoder[1][:, :2].all()  # padded keys hidden
    assert not cross[1][:, 2:].any()
    lower = torch.ones(3, 3, dtype=torch.bool).tril()
    assert torch.equal(decoder[0], lower)  # query i sees keys 0..i
    assert torch.equal(decoder[1], lower & torch.tensor([True, True, False]))


def test_the_picture_holds_the_masks(tmp_path):
    src = torch.tensor([[5, 6, 7], [5, PAD, PAD]])
    tgt = torch.tensor([[1, 9, 10, 11], [1, 9, PAD, PAD]])
    fig = masks_figure(src, tgt, pad_id=PAD)
    grids = batch_masks(src, tgt, pad_id=PAD)
    for row in range(2):
        for col in range(3):
            shown = fig.axes[row * 3 + col].images[0].get_array()
            assert np.array_equal(np.asarray(shown), grids[col][row].numpy())
    _check_image(save_figure(fig, tmp_path / "masks.png"))
