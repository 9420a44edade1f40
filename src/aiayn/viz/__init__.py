"""Pictures of what the model does: Figure 1 from a model's modules, attention heatmaps, masks,
positional encodings, the learning-rate schedules, label smoothing's targets, training curves.

matplotlib is imported lazily, with the headless Agg backend; every function returns a
``matplotlib.figure.Figure`` so notebooks can show it, and ``save_figure`` writes PNG or SVG.
"""

from aiayn.viz.architecture import architecture_figure
from aiayn.viz.attention import (
    AttentionPlotData,
    attention_figure,
    attention_plot_data,
    translation_attention,
)
from aiayn.viz.curves import curves_figure
from aiayn.viz.figure import save_figure
from aiayn.viz.masks import batch_masks, masks_figure
from aiayn.viz.positional import positional_figure
from aiayn.viz.training import schedule_figure, smoothed_target, smoothing_figure

__all__ = [
    "AttentionPlotData",
    "architecture_figure",
    "attention_figure",
    "attention_plot_data",
    "batch_masks",
    "curves_figure",
    "masks_figure",
    "positional_figure",
    "save_figure",
    "schedule_figure",
    "smoothed_target",
    "smoothing_figure",
    "translation_attention",
]
