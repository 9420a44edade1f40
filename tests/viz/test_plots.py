"""Plots render headless, to images of the expected size that are not blank."""

import numpy as np
import pytest
import torch
from PIL import Image

from aiayn.cli import main
from aiayn.train.metrics import Kind, read_metrics
from aiayn.viz import (
    attention_figure,
    attention_plot_data,
    curves_figure,
    positional_figure,
    save_figure,
)

from ..conftest import tiny_model


def _check_image(path, min_size=(300, 200)):
    with Image.open(path) as image:
        assert image.size[0] >= min_size[0] and image.size[1] >= min_size[1]
        pixels = np.asarray(image.convert("L"), dtype=np.float32)
    assert pixels.std() > 10, "blank image"


@pytest.fixture(scope="module")
def plot_data():
    model = tiny_model(n_encoder_layers=2, n_decoder_layers=2)
    return attention_plot_data(
        model, [5, 6, 7, 8], [9, 10, 11], src_pieces=list("abcd"), tgt_pieces=list("xyz")
    )


def test_plotted_attention_is_what_the_model_returns(plot_data):
    assert plot_data.encoder.shape == (2, 4, 5, 5)  # layers, heads, src+EOS, src+EOS
    assert plot_data.decoder.shape == (2, 4, 4, 4)  # BOS+tgt queries and keys
    assert plot_data.cross.shape == (2, 4, 4, 5)
    for kind in ("encoder", "decoder", "cross"):
        np.testing.assert_allclose(plot_data.weights(kind).sum(-1), 1.0, rtol=1e-5)
    assert np.all(np.triu(plot_data.decoder, k=1) == 0)  # look-ahead positions get nothing
    model = tiny_model(n_encoder_layers=2, n_decoder_layers=2)
    with torch.no_grad():
        _, maps = model.forward_with_attention(
            torch.tensor([[5, 6, 7, 8, 3]]), torch.tensor([[2, 9, 10, 11]])
        )
    np.testing.assert_allclose(plot_data.cross[1], maps.decoder_cross[1][0].numpy())
    assert plot_data.axes("cross") == (["x", "y", "z", "</s>"], ["a", "b", "c", "d", "</s>"])


@pytest.mark.parametrize("kind", ["encoder", "decoder", "cross"])
def test_attention_figure_renders(plot_data, kind, tmp_path):
    path = save_figure(attention_figure(plot_data, kind), tmp_path / f"{kind}.png")
    _check_image(path)


def test_layer_and_head_selection(plot_data, tmp_path):
    figure = attention_figure(plot_data, "cross", layers=[1], heads=[0, 2])
    heatmaps = [ax for ax in figure.axes if ax.get_label() != "<colorbar>"]
    assert [ax.get_title() for ax in heatmaps] == ["layer 2, head 1", "layer 2, head 3"]
    save_figure(figure, tmp_path / "a.svg")
    assert (tmp_path / "a.svg").read_text().lstrip().startswith("<?xml")
    with pytest.raises(ValueError, match="out of range"):
        attention_figure(plot_data, "cross", layers=[5])


def test_positional_figure(tmp_path):
    _check_image(
        save_figure(positional_figure(d_model=64, length=50), tmp_path / "p.png"),
        min_size=(800, 300),
    )


def test_curves_from_a_metrics_log(tmp_path):
    rows = [
        {
            "kind": "train",
            "update": u,
            "loss": 5 - u / 100,
            "nll": 4.8 - u / 100,
            "lr": u * 1e-5,
            "tokens_per_s": 1.0,
        }
        for u in range(10, 110, 10)
    ]
    rows += [
        {
            "kind": "valid",
            "update": u,
            "loss": 4.5,
            "nll": 4.4 - u / 200,
            "ppl": 80.0,
            "bleu": u / 10,
            "bleu_beam": 1.0,
        }
        for u in (50, 100)
    ]
    rows.append({**rows[0], "loss": 9.0})  # a resumed run re-logs update 10: the later wins
    import json

    (tmp_path / "metrics.jsonl").write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    assert read_metrics(tmp_path)[Kind.TRAIN][0]["loss"] == 9.0
    figure = curves_figure(tmp_path)
    assert len(figure.axes) == 3
    assert figure.axes[2].get_title() == "Validation BLEU (greedy)"
    _check_image(save_figure(figure, tmp_path / "c.png"), min_size=(800, 200))


def test_cli_plots_and_errors(tmp_path, capsys):
    assert main(["plot", "positional", "--d-model", "32", "-o", str(tmp_path / "p.png")]) == 0
    assert main(["plot", "positional", "-o", str(tmp_path / "p.jpg")]) == 2
    assert ".png or .svg" in capsys.readouterr().err
    assert main(["plot", "curves", str(tmp_path), "-o", str(tmp_path / "c.png")]) == 2
    assert "no metrics log" in capsys.readouterr().err
