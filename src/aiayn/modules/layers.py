"""Encoder and decoder layers (§3.1), each made of sub-layers wrapped in residual connections.

Layers take their parts as arguments; ``aiayn.models.build`` makes them from a config.

Shapes: B batch, S source length, T new target positions, L cached positions, D d_model.
"""

from __future__ import annotations

from torch import Tensor, nn

from aiayn.modules.attention import CrossAttention, SelfAttention
from aiayn.modules.cache import KeyValues, MemoryKeyValues
from aiayn.modules.feedforward import PositionwiseFeedForward


# --8<-- [start:sublayer_connection]
class SublayerConnection(nn.Module):
    """Residual connection around a sub-layer, with dropout on its output (§5.4).

    Post-norm (the paper, §3.1): LayerNorm(x + Dropout(Sublayer(x))).
    Pre-norm: x + Dropout(Sublayer(LayerNorm(x))).
    """

    def __init__(self, *, norm: nn.LayerNorm, dropout: nn.Module, norm_first: bool):
        super().__init__()
        self.norm = norm
        self.dropout = dropout
        self.norm_first = norm_first

    def sublayer_input(self, x: Tensor) -> Tensor:
        return self.norm(x) if self.norm_first else x

    def add(self, x: Tensor, sublayer_output: Tensor) -> Tensor:
        y = x + self.dropout(sublayer_output)
        return y if self.norm_first else self.norm(y)


# --8<-- [end:sublayer_connection]


class EncoderLayer(nn.Module):
    """Self-attention then a feed-forward network, each in a sublayer connection."""

    def __init__(
        self,
        *,
        self_attn: SelfAttention,
        self_attn_connection: SublayerConnection,
        ffn: PositionwiseFeedForward,
        ffn_connection: SublayerConnection,
    ):
        super().__init__()
        self.self_attn = self_attn
        self.self_attn_connection = self_attn_connection
        self.ffn = ffn
        self.ffn_connection = ffn_connection

    # --8<-- [start:encoder_layer]
    def forward(
        self, x: Tensor, *, mask: Tensor | None, need_weights: bool = False
    ) -> tuple[Tensor, Tensor | None]:
        """(B, S, D) -> (B, S, D), and self-attention weights (B, H, S, S) when asked."""
        h = self.self_attn_connection.sublayer_input(x)
        attended, weights, _ = self.self_attn(h, mask=mask, need_weights=need_weights)
        x = self.self_attn_connection.add(x, attended)
        x = self.ffn_connection.add(x, self.ffn(self.ffn_connection.sublayer_input(x)))
        return x, weights

    # --8<-- [end:encoder_layer]


class DecoderLayer(nn.Module):
    """Masked self-attention, encoder–decoder attention, then a feed-forward network (§3.1).

    Without ``cross_attn`` the layer has no encoder–decoder attention at all (no unused
    weights): the block of a decoder-only language model.
    """

    def __init__(
        self,
        *,
        self_attn: SelfAttention,
        self_attn_connection: SublayerConnection,
        ffn: PositionwiseFeedForward,
        ffn_connection: SublayerConnection,
        cross_attn: CrossAttention | None = None,
        cross_attn_connection: SublayerConnection | None = None,
    ):
        super().__init__()
        self.self_attn = self_attn
        self.self_attn_connection = self_attn_connection
        self.cross_attn = cross_attn
        self.cross_attn_connection = cross_attn_connection
        self.ffn = ffn
        self.ffn_connection = ffn_connection

    # --8<-- [start:decoder_layer]
    def forward(
        self,
        x: Tensor,
        *,
        self_mask: Tensor | None,
        memory_kv: MemoryKeyValues | None = None,
        cross_mask: Tensor | None = None,
        past: KeyValues | None = None,
        need_weights: bool = False,
    ) -> tuple[Tensor, KeyValues | None, Tensor | None, Tensor | None]:
        """Run the layer on T new positions: (B, T, D) states, ``past`` extended (None
        without), self-attention (B, H, T, L+T) and cross-attention (B, H, T, S) weights.

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
            assert memory_kv is not None, "this decoder layer attends to an encoder's memory"
            h = self.cross_attn_connection.sublayer_input(x)
            attended, cross_weights = self.cross_attn(
                h, memory_kv, mask=cross_mask, need_weights=need_weights
            )
            x = self.cross_attn_connection.add(x, attended)
        x = self.ffn_connection.add(x, self.ffn(self.ffn_connection.sublayer_input(x)))
        return x, self_kv, self_weights, cross_weights

    # --8<-- [end:decoder_layer]
