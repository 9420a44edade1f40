"""The paper's building blocks as pure ``nn.Module``s: keyword-only arguments, no config
objects, and no speed tricks (those live in ``aiayn.accel``, behind the same interfaces)."""

from aiayn.modules.attention import CrossAttention, SelfAttention, scaled_dot_product_attention
from aiayn.modules.cache import ConcatKeyValues, KeyValues, KVCache, MemoryKeyValues
from aiayn.modules.embedding import OutputProjection, TokenEmbedding
from aiayn.modules.feedforward import PositionwiseFeedForward
from aiayn.modules.layers import DecoderLayer, EncoderLayer
from aiayn.modules.positional import (
    POSITIONAL,
    LearnedPositionalEmbedding,
    SinusoidalPositionalEncoding,
    sinusoid_table,
)

__all__ = [
    "POSITIONAL",
    "ConcatKeyValues",
    "CrossAttention",
    "DecoderLayer",
    "EncoderLayer",
    "KVCache",
    "KeyValues",
    "LearnedPositionalEmbedding",
    "MemoryKeyValues",
    "OutputProjection",
    "PositionwiseFeedForward",
    "SelfAttention",
    "SinusoidalPositionalEncoding",
    "TokenEmbedding",
    "scaled_dot_product_attention",
    "sinusoid_table",
]
