"""The tutorial's pictures: Figure 1 drawn from a model's own modules, the learning-rate
schedules, and label smoothing's target read from the loss."""

import math

import pytest
import torch
from torch import nn

from aiayn.viz import (
    architecture_figure,
    attention_figure,
    attention_plot_data,
    save_figure,
    schedule_figure,
    smoothed_target,
    smoothing_figure,
)
from aiayn.viz.architecture import paper_name

from ..conftest import tiny_model
from .test_plots import _check_image


def _texts(figure) -> list[str]:
    return [text.get_text() for ax in figure.axes for text in ax.texts]


def test_figure_1_names_every_sub_module_of_the_layers_with_the_papers_label():
    model = tiny_model(n_encoder_layers=2, n_decoder_layers=3)
    texts = "\n".join(_texts(architecture_figure(model)))
    for layer in (model.encoder.layers[0], model.decoder.layers[0]):
        for name, child in layer.named_children():
            assert f"{name}: {type(child).__name__}" in texts
    assert paper_name(model.decoder.layers[0].cross_attn) == "Multi-Head Attention"
    assert paper_name(model.encoder.layers[0].ffn_connection) == "Add & Norm"
    assert "Masked Multi-Head Attention (causal)" in texts  # the decoder's self-attention
    assert "decoder.layers: N = 3 × DecoderLayer" in texts
    assert "encoder.layers: N = 2 × EncoderLayer" in texts
    assert "src_embed: EmbeddingWithPositions" in texts and "(B, S, D)" in texts
    assert "output: OutputProjection (Linear, tied to tgt_embed)" in texts
    untied = tiny_model(tie_output=False, share_embeddings=False)
    assert "output: OutputProjection (Linear)" in _texts(architecture_figure(untied))


def test_figure_1_follows_a_layer_that_gains_a_sub_module(tmp_path):
    model = tiny_model()
    model.encoder.layers[0].extra = nn.Identity()  # drawn as a box of its own
    figure = architecture_figure(model)
    assert "extra: Identity\n" in _texts(figure)
    _check_image(save_figure(figure, tmp_path / "figure1.png"), min_size=(800, 500))


def test_label_smoothing_target_is_what_cross_entropy_trains_towards():
    target = smoothed_target(10, 3, 0.1)
    assert math.isclose(target.sum().item(), 1.0, rel_tol=1e-6)
    assert math.isclose(target[3].item(), 0.9 + 0.01, rel_tol=1e-5)
    assert torch.allclose(target[torch.arange(10) != 3], torch.full((9,), 0.01), atol=1e-6)
    one_hot = nn.functional.one_hot(torch.tensor(3), 10).float()
    assert torch.allclose(smoothed_target(10, 3, 0.0), one_hot, atol=1e-6)


@pytest.mark.parametrize("draw", [schedule_figure, smoothing_figure], ids=["schedule", "smoothing"])
def test_training_pictures_render(draw, tmp_path):
    _check_image(save_figure(draw(), tmp_path / "picture.png"), min_size=(800, 300))


def test_masked_cells_of_the_decoders_attention_are_drawn_apart():
    model = tiny_model()
    data = attention_plot_data(
        model, [5, 6, 7], [8, 9], src_pieces=list("abc"), tgt_pieces=list("xy")
    )
    figure = attention_figure(data, "decoder", layers=[0], heads=[0])
    shown = figure.axes[0].images[0].get_array()  # (T, T), masked where the causal mask hides
    assert shown.mask[0, 1] and not shown.mask[1, 0] and not shown.mask[1, 1]
    assert "causal mask" in figure._suptitle.get_text()
