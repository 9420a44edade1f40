"""The encoder–decoder Transformer (§3, Figure 1).

Shapes: B batch, S source length, T target length, L cached length, D d_model, H heads, V vocab.
"""

from __future__ import annotations

from typing import NamedTuple

from torch import Tensor, nn

from aiayn import masks
from aiayn.modules import DecoderLayer, EncoderLayer, KVCache, OutputProjection, TokenEmbedding
from aiayn.modules.attention import KeyValue
from aiayn.modules.dropout import Dropout
from aiayn.modules.kv_buffer import KeyValueBuffer


class Encoder(nn.Module):
    """A stack of N encoder layers; a final LayerNorm when the layers are pre-norm."""

    def __init__(self, *, layers: list[EncoderLayer], final_norm: nn.LayerNorm | None):
        super().__init__()
        self.layers = nn.ModuleList(layers)
        self.final_norm = final_norm

    def forward(
        self, x: Tensor, *, mask: Tensor | None, need_weights: bool = False
    ) -> tuple[Tensor, list[Tensor]]:
        """(B, S, D) -> (B, S, D), and per-layer self-attention weights when asked."""
        weights = []
        for layer in self.layers:
            x, w = layer(x, mask=mask, need_weights=need_weights)
            if w is not None:
                weights.append(w)
        if self.final_norm is not None:
            x = self.final_norm(x)
        return x, weights


class DecoderOutput(NamedTuple):
    x: Tensor  # (B, T, D)
    self_kv: tuple[KeyValueBuffer, ...]  # per layer, (B, H, L+T, Dh) each
    self_weights: list[Tensor]  # per layer, (B, H, T, L+T), when asked
    cross_weights: list[Tensor]  # per layer, (B, H, T, S), when asked


class Decoder(nn.Module):
    """A stack of N decoder layers; a final LayerNorm when the layers are pre-norm."""

    def __init__(self, *, layers: list[DecoderLayer], final_norm: nn.LayerNorm | None):
        super().__init__()
        self.layers = nn.ModuleList(layers)
        self.final_norm = final_norm

    def project_memory(self, memory: Tensor) -> tuple[KeyValue, ...]:
        """Every layer's encoder–decoder keys/values, (B, H, S, Dh) each, computed once."""
        return tuple(layer.cross_attn.project_memory(memory) for layer in self.layers)

    def forward(
        self,
        x: Tensor,
        *,
        self_mask: Tensor | None,
        cache: KVCache,
        cross_mask: Tensor | None = None,
        need_weights: bool = False,
    ) -> DecoderOutput:
        """Run T new positions (B, T, D) through every layer, after the L in ``cache``."""
        self_kv, self_weights, cross_weights = [], [], []
        for i, layer in enumerate(self.layers):
            out = layer(
                x,
                self_mask=self_mask,
                memory_kv=cache.cross_attn[i] if cache.cross_attn else None,
                cross_mask=cross_mask,
                past=cache.self_attn[i],
                need_weights=need_weights,
            )
            x = out.x
            self_kv.append(out.self_kv)
            if out.self_weights is not None:
                self_weights.append(out.self_weights)
            if out.cross_weights is not None:
                cross_weights.append(out.cross_weights)
        if self.final_norm is not None:
            x = self.final_norm(x)
        return DecoderOutput(x, tuple(self_kv), self_weights, cross_weights)


class EmbeddingWithPositions(nn.Module):
    """Scaled token embedding + positional encoding, then dropout (§3.4, §3.5, §5.4)."""

    def __init__(self, *, tokens: TokenEmbedding, positions: nn.Module, dropout: float):
        super().__init__()
        self.tokens = tokens
        self.positions = positions
        self.dropout = Dropout(dropout)

    def forward(self, ids: Tensor, offset: int = 0) -> Tensor:
        """(B, T) ids at positions offset .. offset+T-1 -> (B, T, D)."""
        return self.dropout(self.tokens(ids) + self.positions(ids.size(1), offset))


class AttentionMaps(NamedTuple):
    """Attention weights of one forward pass, one (B, H, Tq, Tk) tensor per layer."""

    encoder_self: list[Tensor]  # (B, H, S, S)
    decoder_self: list[Tensor]  # (B, H, T, T)
    decoder_cross: list[Tensor]  # (B, H, T, S)


class Transformer(nn.Module):
    """Encoder–decoder Transformer. Returns logits; loss and search live elsewhere."""

    def __init__(
        self,
        *,
        src_embed: EmbeddingWithPositions,
        tgt_embed: EmbeddingWithPositions,
        encoder: Encoder,
        decoder: Decoder,
        output: OutputProjection,
        pad_id: int,
    ):
        super().__init__()
        self.src_embed = src_embed
        self.tgt_embed = tgt_embed
        self.encoder = encoder
        self.decoder = decoder
        self.output = output
        self.pad_id = pad_id

    def source_mask(self, src: Tensor) -> Tensor:
        """(B, S) ids -> (B, 1, 1, S) bool padding mask for encoder and cross attention."""
        return masks.padding_mask(src, self.pad_id)

    def encode(self, src: Tensor, src_mask: Tensor | None = None) -> Tensor:
        """(B, S) source ids -> (B, S, D) memory."""
        memory, _ = self._encode(src, src_mask)
        return memory

    def start_cache(self, memory: Tensor) -> KVCache:
        """An empty cache holding the encoder–decoder keys/values of ``memory``."""
        return KVCache.empty(len(self.decoder.layers), self.decoder.project_memory(memory))

    def decode(
        self,
        tgt: Tensor,
        memory: Tensor | None,
        src_mask: Tensor | None,
        *,
        cache: KVCache | None = None,
        tgt_mask: Tensor | None = None,
    ) -> tuple[Tensor, KVCache]:
        """Logits for T new target positions, after the L positions in ``cache``.

        Args:
            tgt: (B, T) target ids at positions L .. L+T-1; or (B·K, T) for K hypotheses
                per sentence in consecutive rows (beam search), which share its memory.
            memory: (B, S, D) encoder output; only read when ``cache`` is None (a cache
                already holds the encoder–decoder keys/values).
            src_mask: (B, 1, 1, S) source padding mask.
            cache: keys/values of earlier positions, or None to start afresh.
            tgt_mask: self-attention mask broadcastable to (B, H, T, L+T); default causal.

        Returns:
            (B, T, V) logits and the cache extended by T positions.
        """
        states, cache = self.decode_states(tgt, memory, src_mask, cache=cache, tgt_mask=tgt_mask)
        return self.output(states), cache

    def decode_states(
        self,
        tgt: Tensor,
        memory: Tensor | None,
        src_mask: Tensor | None,
        *,
        cache: KVCache | None = None,
        tgt_mask: Tensor | None = None,
    ) -> tuple[Tensor, KVCache]:
        """``decode`` without the output projection: (B, T, D) final decoder states, for
        callers that project them themselves (decoding, with a packed weight)."""
        out, cache = self._decode(tgt, memory, src_mask, cache=cache, tgt_mask=tgt_mask)
        return out.x, cache

    def forward(self, src: Tensor, tgt: Tensor) -> Tensor:
        """Teacher-forced logits: (B, S) source, (B, T) decoder input -> (B, T, V)."""
        return self.output(self.decoder_states(src, tgt))

    def decoder_states(self, src: Tensor, tgt: Tensor) -> Tensor:
        """Teacher-forced final decoder states (B, T, D), before the output projection.

        Training uses them to fuse the projection with the loss (``aiayn.train.loss``).
        """
        src_mask = self.source_mask(src)
        memory, _ = self._encode(src, src_mask)
        tgt_mask = masks.decoder_self_mask(tgt, self.pad_id)
        out, _ = self._decode(tgt, memory, src_mask, tgt_mask=tgt_mask)
        return out.x

    def forward_with_attention(self, src: Tensor, tgt: Tensor) -> tuple[Tensor, AttentionMaps]:
        """Like ``forward`` through the eager attention path, also returning every weight."""
        src_mask = self.source_mask(src)
        memory, enc_weights = self._encode(src, src_mask, need_weights=True)
        tgt_mask = masks.decoder_self_mask(tgt, self.pad_id)
        out, _ = self._decode(tgt, memory, src_mask, tgt_mask=tgt_mask, need_weights=True)
        maps = AttentionMaps(enc_weights, out.self_weights, out.cross_weights)
        return self.output(out.x), maps

    def _encode(
        self, src: Tensor, src_mask: Tensor | None, *, need_weights: bool = False
    ) -> tuple[Tensor, list[Tensor]]:
        if src_mask is None:
            src_mask = self.source_mask(src)
        return self.encoder(self.src_embed(src), mask=src_mask, need_weights=need_weights)

    def _decode(
        self,
        tgt: Tensor,
        memory: Tensor | None,
        src_mask: Tensor | None,
        *,
        cache: KVCache | None = None,
        tgt_mask: Tensor | None = None,
        need_weights: bool = False,
    ) -> tuple[DecoderOutput, KVCache]:
        if cache is None:
            if memory is None:
                raise ValueError("decode needs the encoder output or a cache started from it")
            cache = self.start_cache(memory)
        steps = tgt.size(1)
        if tgt_mask is None and steps > 1:
            tgt_mask = masks.causal_mask(steps, offset=cache.length, device=tgt.device)
        out = self.decoder(
            self.tgt_embed(tgt, offset=cache.length),
            self_mask=tgt_mask,
            cache=cache,
            cross_mask=src_mask,
            need_weights=need_weights,
        )
        return out, cache.advanced(out.self_kv, steps)
