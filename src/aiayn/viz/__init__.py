"""Pictures of what the model does: attention heatmaps, masks, positional encodings, training
curves.

matplotlib is imported lazily, with the headless Agg backend; every function returns a
``matplotlib.figure.Figure`` so notebooks can show it, and ``save_figure`` writes PNG or SVG.
"""

from aiayn.viz.attention import (
    AttentionPlotData,
    attention_figure,
    attention_plot_data,
    translation_attention,
)
from aiayn.viz.common import save_figure
from aiayn.viz.curves import curves_figure
from aiayn.viz.masks import batch_masks, masks_figure
from aiayn.viz.positional import positional_figure

__all__ = [
    "AttentionPlotData",
    "attention_figure",
    "attention_plot_data",
    "batch_masks",
    "curves_figure",
    "masks_figure",
    "positional_figure",
    "save_figure",
    "translation_attention",
]
