"""Figure 1 of the paper redrawn from a built model: each box is one of its modules, named
as in aiayn (``attribute: Class``) beside the paper's label, with the shape of what flows
between them.

The boxes of a layer are the layer's own sub-modules in order (``named_children``), so the
figure follows the code when a layer changes.

Shapes: B batch, S source length, T target length, D d_model, V vocabulary.
"""

from __future__ import annotations

from typing import Any

from torch import nn

from aiayn.models.transformer import Transformer
from aiayn.viz.figure import pyplot

PAPER_NAMES = {  # a class (or a base class) -> the paper's label in Figure 1
    "SelfAttention": "Multi-Head Attention",
    "CrossAttention": "Multi-Head Attention",
    "SublayerConnection": "Add & Norm",
    "PositionwiseFeedForward": "Feed Forward",
}
COLOURS = {
    "Multi-Head Attention": "#fde2b5",
    "Add & Norm": "#f3f6b9",
    "Feed Forward": "#c9e7f5",
    "": "#eeeeee",
}
BOX_WIDTH, BOX_HEIGHT, GAP = 3.9, 0.62, 0.22


def paper_name(module: nn.Module) -> str:
    """The paper's label for ``module``, by its class or a base class ("" if none)."""
    for cls in type(module).__mro__:
        if cls.__name__ in PAPER_NAMES:
            return PAPER_NAMES[cls.__name__]
    return ""


def _box(ax: Any, x: float, y: float, text: str, colour: str, *, width: float = BOX_WIDTH) -> None:
    from matplotlib.patches import FancyBboxPatch

    ax.add_patch(
        FancyBboxPatch(
            (x - width / 2, y),
            width,
            BOX_HEIGHT,
            boxstyle="round,pad=0.02,rounding_size=0.08",
            facecolor=colour,
            edgecolor="#444444",
            linewidth=0.8,
        )
    )
    ax.text(x, y + BOX_HEIGHT / 2, text, ha="center", va="center", fontsize=7.5)


def _arrow(ax: Any, start: tuple[float, float], end: tuple[float, float], label: str = "") -> None:
    ax.annotate(
        "",
        xy=end,
        xytext=start,
        arrowprops={"arrowstyle": "->", "color": "#444444", "linewidth": 0.9},
    )
    if label:
        middle = ((start[0] + end[0]) / 2 + 0.08, (start[1] + end[1]) / 2)
        ax.text(*middle, label, fontsize=7, color="#1f4e9c", va="center", ha="left")


def _layer(ax: Any, x: float, y: float, layer: nn.Module, title: str, *, causal: bool) -> float:
    """One layer's sub-modules bottom to top from ``y``, in a frame; the frame's top."""
    bottom = y
    for name, child in layer.named_children():
        label = paper_name(child)
        shown = f"Masked {label} (causal)" if causal and name == "self_attn" else label
        _box(ax, x, y, f"{name}: {type(child).__name__}\n{shown}", COLOURS.get(label, "#eee"))
        y += BOX_HEIGHT + GAP
    top = y - GAP + 0.1
    from matplotlib.patches import Rectangle

    ax.add_patch(
        Rectangle(
            (x - BOX_WIDTH / 2 - 0.2, bottom - 0.15),
            BOX_WIDTH + 0.4,
            top - bottom + 0.15,
            fill=False,
            edgecolor="#777777",
            linestyle="--",
        )
    )
    side = 1 if causal else -1
    ax.text(
        x + side * (BOX_WIDTH / 2 + 0.4),
        (bottom + top) / 2,
        title,
        rotation=90,
        ha="center",
        va="center",
        fontsize=8.5,
        weight="bold",
    )
    return top + 0.55


def _column(ax: Any, x: float, model: Transformer, side: str) -> float:
    """The encoder (``side`` "S") or the decoder ("T") from its ids up; the frame's top."""
    source = side == "S"
    embed = model.src_embed if source else model.tgt_embed
    stack = model.encoder if source else model.decoder
    layer = stack.layers[0]
    inputs = "src" if source else "tgt_in: <s> y₁ … (shifted right)"
    ax.text(x, 0.15, f"{inputs}  (B, {side}) ids", ha="center", fontsize=8)
    embedding = (
        f"{'src' if source else 'tgt'}_embed: {type(embed).__name__}\n"
        f"{type(embed.tokens).__name__} × √D + {type(embed.positions).__name__}"
    )
    _box(ax, x, 0.75, embedding, "#f8d3d3")
    _arrow(ax, (x, 0.4), (x, 0.75))
    _arrow(ax, (x, 0.75 + BOX_HEIGHT), (x, 1.95), f"(B, {side}, D)")
    name = "encoder" if source else "decoder"
    title = f"{name}.layers: N = {len(stack.layers)} × {type(layer).__name__}"
    return _layer(ax, x, 2.0, layer, title, causal=not source)


def architecture_figure(model: Transformer) -> Any:
    """Figure 1 of the paper drawn from ``model``'s modules (an aiayn ``Transformer``)."""
    plt = pyplot()
    dec_layer = model.decoder.layers[0]
    rows = len(list(dec_layer.named_children()))
    height = 3.1 + rows * (BOX_HEIGHT + GAP)
    fig, ax = plt.subplots(figsize=(10.5, height * 0.78))
    ax.set_xlim(0.2, 11.6)
    ax.set_ylim(0, height)
    ax.axis("off")
    enc_x, dec_x = 2.9, 8.6
    enc_top, dec_top = _column(ax, enc_x, model, "S"), _column(ax, dec_x, model, "T")
    _box(ax, enc_x, enc_top, "memory", "#ffffff", width=1.6)
    _arrow(ax, (enc_x, enc_top - 0.5), (enc_x, enc_top), "(B, S, D)")
    children = [type(child).__name__ for _, child in dec_layer.named_children()]
    if any("Cross" in name for name in children):
        row = next(i for i, name in enumerate(children) if "Cross" in name)
        cross_y = 2.0 + row * (BOX_HEIGHT + GAP) + BOX_HEIGHT / 2
        _arrow(ax, (enc_x + 0.8, enc_top + BOX_HEIGHT / 2), (dec_x - BOX_WIDTH / 2, cross_y))
        middle_y = (enc_top + BOX_HEIGHT / 2 + cross_y) / 2
        ax.text(
            (enc_x + dec_x) / 2 - 0.1,
            middle_y + 0.3,
            "keys, values\n(B, H, S, Dh)",
            fontsize=7,
            color="#1f4e9c",
            ha="right",
            va="bottom",
        )
    tied = model.output.weight is model.tgt_embed.tokens.weight
    output = (
        f"output: {type(model.output).__name__} (Linear{', tied to tgt_embed' if tied else ''})"
    )
    _box(ax, dec_x, dec_top, output, "#d9f0d3")
    _arrow(ax, (dec_x, dec_top - 0.5), (dec_x, dec_top), "(B, T, D)")
    logits = "logits (B, T, V) → softmax in the loss or the search"
    ax.text(dec_x, dec_top + BOX_HEIGHT + 0.35, logits, ha="center", fontsize=8)
    _arrow(ax, (dec_x, dec_top + BOX_HEIGHT), (dec_x, dec_top + BOX_HEIGHT + 0.3))
    fig.suptitle("Figure 1 of the paper, in aiayn's modules", fontsize=11)
    return fig
