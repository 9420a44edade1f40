"""Attention heatmaps: every chosen layer and head, for each of the three attentions (§3.2.3).
Named after ``aiayn.modules.attention``, whose weights it draws.

The weights come from the model's eager attention path on request
(``Transformer.forward_with_attention``), never from state stored on modules.

Shapes: L layers, H heads, S source length (with EOS), T target length (with BOS / EOS).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

import numpy as np
import torch

from aiayn.models.transformer import Transformer
from aiayn.viz.figure import PlotError, pyplot

if TYPE_CHECKING:
    from aiayn.translate.translator import Translator

Kind = Literal["encoder", "decoder", "cross"]
TITLES = {
    "encoder": "Encoder self-attention",
    "decoder": "Decoder masked self-attention",
    "cross": "Encoder–decoder attention",
}


@dataclass(frozen=True)
class AttentionPlotData:
    src_tokens: list[str]  # encoder positions: source subwords + </s>
    tgt_in_tokens: list[str]  # decoder inputs: <s> + target subwords
    tgt_out_tokens: list[str]  # what each decoder position predicts: target subwords + </s>
    encoder: np.ndarray  # (L, H, S, S)
    decoder: np.ndarray  # (L, H, T, T)
    cross: np.ndarray  # (L, H, T, S)

    def weights(self, kind: Kind) -> np.ndarray:
        return {"encoder": self.encoder, "decoder": self.decoder, "cross": self.cross}[kind]

    def axes(self, kind: Kind) -> tuple[list[str], list[str]]:
        """(query labels, key labels)."""
        if kind == "encoder":
            return self.src_tokens, self.src_tokens
        if kind == "decoder":
            return self.tgt_out_tokens, self.tgt_in_tokens
        return self.tgt_out_tokens, self.src_tokens


@torch.no_grad()
def attention_plot_data(
    model: Transformer,
    src_ids: Sequence[int],
    tgt_ids: Sequence[int],
    *,
    src_pieces: Sequence[str],
    tgt_pieces: Sequence[str],
) -> AttentionPlotData:
    """Force-decode ``tgt_ids`` after ``src_ids`` (subword ids without BOS/EOS) and collect
    every attention weight. ``*_pieces`` are the subword strings of the ids, for labels."""
    model.eval()
    src = torch.tensor([[*src_ids, model.specials.eos]])  # (1, S)
    tgt = torch.tensor([[model.specials.bos, *tgt_ids]])  # (1, T)
    _, maps = model.forward_with_attention(src, tgt)

    def stack(per_layer: list[torch.Tensor]) -> np.ndarray:
        return torch.stack([w[0] for w in per_layer]).float().numpy()  # (L, H, Tq, Tk)

    return AttentionPlotData(
        src_tokens=[*src_pieces, "</s>"],
        tgt_in_tokens=["<s>", *tgt_pieces],
        tgt_out_tokens=[*tgt_pieces, "</s>"],
        encoder=stack(maps.encoder_self),
        decoder=stack(maps.decoder_self),
        cross=stack(maps.decoder_cross),
    )


def translation_attention(
    translator: Translator, src_ids: Sequence[int], tgt_ids: Sequence[int]
) -> AttentionPlotData:
    """``attention_plot_data`` of a translator's model, labelled with its tokenizers' pieces
    (what ``aiayn plot attention`` and the server's page draw)."""
    return attention_plot_data(
        translator.model,
        src_ids,
        tgt_ids,
        src_pieces=translator.src_tokenizer.pieces(src_ids),
        tgt_pieces=translator.tgt_tokenizer.pieces(tgt_ids),
    )


def attention_figure(
    data: AttentionPlotData,
    kind: Kind,
    *,
    layers: Sequence[int] | None = None,
    heads: Sequence[int] | None = None,
) -> Any:
    """A grid of heatmaps, one row per layer and one column per head; rows are queries
    (what attends), columns keys (what is attended to)."""
    weights = data.weights(kind)  # (L, H, Tq, Tk)
    layers = list(range(weights.shape[0])) if layers is None else list(layers)
    heads = list(range(weights.shape[1])) if heads is None else list(heads)
    _check_indices(layers, weights.shape[0], "layer")
    _check_indices(heads, weights.shape[1], "head")
    queries, keys = data.axes(kind)
    cell = max(2.4, 0.16 * max(len(queries), len(keys)))
    plt = pyplot()
    fig, grid = plt.subplots(
        len(layers),
        len(heads),
        squeeze=False,
        figsize=(cell * len(heads) + 1.4, cell * len(layers) + 1.0),
        layout="constrained",
    )
    colours = plt.get_cmap("viridis").with_extremes(bad="#d9d9d9")
    fontsize = 8 if max(len(queries), len(keys)) <= 25 else 6
    for row, layer in enumerate(layers):
        for col, head in enumerate(heads):
            ax = grid[row][col]
            image = ax.imshow(
                _masked(weights[layer, head], kind),
                cmap=colours,
                vmin=0.0,
                vmax=1.0,
                interpolation="nearest",
                aspect="equal",
            )
            ax.set_title(f"layer {layer + 1}, head {head + 1}", fontsize=9)
            ax.set_xticks(range(len(keys)))
            ax.set_yticks(range(len(queries)))
            bottom, left = row == len(layers) - 1, col == 0
            ax.set_xticklabels(keys if bottom else [], rotation=90, fontsize=fontsize)
            ax.set_yticklabels(queries if left else [], fontsize=fontsize)
            ax.tick_params(length=0)
    fig.supxlabel("key: what is attended to", fontsize=9)
    fig.supylabel("query: what attends", fontsize=9)
    fig.colorbar(image, ax=grid, shrink=0.6, label="attention weight")
    note = "  (grey: masked, the causal mask)" if kind == "decoder" else ""
    fig.suptitle(TITLES[kind] + note, fontsize=12)
    return fig


def _masked(weights: np.ndarray, kind: Kind) -> np.ndarray:
    """(Tq, Tk) weights with the cells the causal mask hides as NaN (drawn grey)."""
    if kind != "decoder":
        return weights
    return np.where(np.triu(np.ones(weights.shape, dtype=bool), k=1), np.nan, weights)


def _check_indices(chosen: Sequence[int], count: int, what: str) -> None:
    bad = [i for i in chosen if not 0 <= i < count]
    if bad:
        raise PlotError(f"{what} {[i + 1 for i in bad]} out of range: the model has {count}")
