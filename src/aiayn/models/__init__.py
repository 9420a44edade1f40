"""Models: the encoder–decoder Transformer and how to build, save and load it."""

from aiayn.models.build import build_lm, build_model, init_weights
from aiayn.models.io import ModelLoadError, load_model, save_model
from aiayn.models.lm import TransformerLM
from aiayn.models.transformer import AttentionMaps, Transformer

__all__ = [
    "AttentionMaps",
    "ModelLoadError",
    "Transformer",
    "TransformerLM",
    "build_lm",
    "build_model",
    "init_weights",
    "load_model",
    "save_model",
]
