"""The paper's models: the encoder–decoder Transformer, the decoder-only language model, and
the one builder that turns a config into either."""

from aiayn.models.build import build_model, init_weights
from aiayn.models.lm import TransformerLM
from aiayn.models.transformer import AttentionMaps, Decoded, Transformer

__all__ = [
    "AttentionMaps",
    "Decoded",
    "Transformer",
    "TransformerLM",
    "build_model",
    "init_weights",
]
