"""Pure ``nn.Module`` building blocks. Keyword-only arguments; no config objects here."""

from aiayn.modules.attention import CrossAttention, SelfAttention, scaled_dot_product_attention
from aiayn.modules.cache import KVCache
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
    "CrossAttention",
    "DecoderLayer",
    "EncoderLayer",
    "KVCache",
    "LearnedPositionalEmbedding",
    "OutputProjection",
    "PositionwiseFeedForward",
    "SelfAttention",
    "SinusoidalPositionalEncoding",
    "TokenEmbedding",
    "scaled_dot_product_attention",
    "sinusoid_table",
]
