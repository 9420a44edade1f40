"""Encoder and decoder layers (§3.1), post-norm as the paper or pre-norm as an option.

Shapes: B batch, S source length, T target length, L cached length, D d_model, H heads.
"""

from __future__ import annotations

from typing import NamedTuple

from torch import Tensor, nn

from aiayn.modules.attention import CrossAttention, KeyValue, SelfAttention
from aiayn.modules.dropout import Dropout
from aiayn.modules.feedforward import PositionwiseFeedForward
from aiayn.modules.kv_buffer import KeyValueBuffer


class SublayerConnection(nn.Module):
    """Residual connection around a sub-layer, with dropout on its output (§5.4).

    Post-norm (the paper, §3.1): LayerNorm(x + Dropout(Sublayer(x))).
    Pre-norm: x + Dropout(Sublayer(LayerNorm(x))).
    """

    def __init__(self, *, d_model: int, dropout: float, norm_first: bool, bias: bool, eps: float):
        super().__init__()
        self.norm = nn.LayerNorm(d_model, eps=eps, bias=bias)
        self.dropout = Dropout(dropout)
        self.norm_first = norm_first

    def sublayer_input(self, x: Tensor) -> Tensor:
        return self.norm(x) if self.norm_first else x

    def add(self, x: Tensor, sublayer_output: Tensor) -> Tensor:
        y = x + self.dropout(sublayer_output)
        return y if self.norm_first else self.norm(y)


class EncoderLayer(nn.Module):
    """Self-attention then a feed-forward network, each in a sublayer connection."""

    def __init__(
        self,
        *,
        d_model: int,
        n_heads: int,
        d_ff: int,
        dropout: float,
        attention_dropout: float = 0.0,
        activation: str = "relu",
        activation_dropout: float = 0.0,
        norm_first: bool = False,
        bias: bool = True,
        eps: float = 1e-5,
    ):
        super().__init__()
        connection = dict(
            d_model=d_model, dropout=dropout, norm_first=norm_first, bias=bias, eps=eps
        )
        self.self_attn = SelfAttention(
            d_model=d_model, n_heads=n_heads, dropout=attention_dropout, bias=bias
        )
        self.self_attn_connection = SublayerConnection(**connection)
        self.ffn = PositionwiseFeedForward(
            d_model=d_model,
            d_ff=d_ff,
            activation=activation,
            activation_dropout=activation_dropout,
            bias=bias,
        )
        self.ffn_connection = SublayerConnection(**connection)

    def forward(
        self, x: Tensor, *, mask: Tensor | None, need_weights: bool = False
    ) -> tuple[Tensor, Tensor | None]:
        """(B, S, D) -> (B, S, D), and self-attention weights (B, H, S, S) when asked."""
        h = self.self_attn_connection.sublayer_input(x)
        attended, weights, _ = self.self_attn(h, mask=mask, need_weights=need_weights)
        x = self.self_attn_connection.add(x, attended)
        x = self.ffn_connection.add(x, self.ffn(self.ffn_connection.sublayer_input(x)))
        return x, weights


class DecoderLayerOutput(NamedTuple):
    x: Tensor  # (B, T, D)
    self_kv: KeyValueBuffer  # (B, H, L+T, Dh) each: the self-attention cache after this step
    self_weights: Tensor | None  # (B, H, T, L+T)
    cross_weights: Tensor | None  # (B, H, T, S)


class DecoderLayer(nn.Module):
    """Masked self-attention, encoder–decoder attention, then a feed-forward network (§3.1).

    With ``cross_attention=False`` the layer has no encoder–decoder attention at all (no
    unused weights): the block of a decoder-only language model.
    """

    def __init__(
        self,
        *,
        d_model: int,
        n_heads: int,
        d_ff: int,
        dropout: float,
        attention_dropout: float = 0.0,
        activation: str = "relu",
        activation_dropout: float = 0.0,
        norm_first: bool = False,
        bias: bool = True,
        eps: float = 1e-5,
        cross_attention: bool = True,
    ):
        super().__init__()
        connection = dict(
            d_model=d_model, dropout=dropout, norm_first=norm_first, bias=bias, eps=eps
        )
        attention = dict(d_model=d_model, n_heads=n_heads, dropout=attention_dropout, bias=bias)
        self.self_attn = SelfAttention(**attention)
        self.self_attn_connection = SublayerConnection(**connection)
        self.cross_attn = CrossAttention(**attention) if cross_attention else None
        self.cross_attn_connection = SublayerConnection(**connection) if cross_attention else None
        self.ffn = PositionwiseFeedForward(
            d_model=d_model,
            d_ff=d_ff,
            activation=activation,
            activation_dropout=activation_dropout,
            bias=bias,
        )
        self.ffn_connection = SublayerConnection(**connection)

    def forward(
        self,
        x: Tensor,
        *,
        self_mask: Tensor | None,
        memory_kv: KeyValue | None = None,
        cross_mask: Tensor | None = None,
        past: KeyValueBuffer | None = None,
        need_weights: bool = False,
    ) -> DecoderLayerOutput:
        """Run the layer on T new positions.

        Args:
            x: (B, T, D) decoder states.
            self_mask: bool, broadcastable to (B, H, T, L+T); None attends everywhere.
            memory_kv: the encoder output projected by this layer's ``cross_attn``.
            cross_mask: bool, broadcastable to (B, H, T, S): source padding.
            past: this layer's cached self-attention keys/values of L earlier positions.
            need_weights: also return attention weights.
        """
        h = self.self_attn_connection.sublayer_input(x)
        attended, self_weights, self_kv = self.self_attn(
            h, mask=self_mask, past=past, need_weights=need_weights
        )
        x = self.self_attn_connection.add(x, attended)
        cross_weights = None
        if self.cross_attn is not None and self.cross_attn_connection is not None:
            if memory_kv is None:
                raise ValueError("this decoder layer attends to an encoder: pass memory_kv")
            h = self.cross_attn_connection.sublayer_input(x)
            attended, cross_weights = self.cross_attn(
                h, memory_kv, mask=cross_mask, need_weights=need_weights
            )
            x = self.cross_attn_connection.add(x, attended)
        x = self.ffn_connection.add(x, self.ffn(self.ffn_connection.sublayer_input(x)))
        return DecoderLayerOutput(x, self_kv, self_weights, cross_weights)
