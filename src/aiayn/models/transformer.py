"""The encoder–decoder Transformer (§3, Figure 1).

Shapes: B batch, S source length, T target length, L cached length, D d_model, H heads, V vocab.
"""

from __future__ import annotations

from typing import NamedTuple

import torch
from torch import Tensor, nn

from aiayn import masks
from aiayn.accel import Profile
from aiayn.config import SpecialIds
from aiayn.modules import (
    KVCache,
    MemoryKeyValues,
    OutputProjection,
    TokenEmbedding,
)


class Stack(nn.Module):
    """N identical layers; a final LayerNorm after them when the layers are pre-norm."""

    def __init__(self, *, layers: list[nn.Module], final_norm: nn.LayerNorm | None):
        super().__init__()
        self.layers = nn.ModuleList(layers)
        self.final_norm = final_norm


class Encoder(Stack):
    """The encoder stack (§3.1)."""

    # --8<-- [start:encoder]
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

    # --8<-- [end:encoder]


class Decoded(NamedTuple):
    """What decoding T positions gives: final decoder states and the extended cache."""

    hidden: Tensor  # (B, T, D)
    cache: KVCache | None  # None when decoding without a cache


DecoderWeights = tuple[list[Tensor], list[Tensor]]  # per layer: self (B,H,T,L+T), cross (B,H,T,S)


class Decoder(Stack):
    """The decoder stack (§3.1)."""

    def project_memory(self, memory: Tensor) -> tuple[MemoryKeyValues, ...]:
        """Every layer's encoder–decoder keys/values, (B, H, S, Dh) each, computed once."""
        return tuple(layer.cross_attn.project_memory(memory) for layer in self.layers)

    # --8<-- [start:decoder]
    def forward(
        self,
        x: Tensor,
        *,
        cache: KVCache | None = None,
        self_mask: Tensor | None = None,
        memory_kv: tuple[MemoryKeyValues, ...] = (),
        cross_mask: Tensor | None = None,
        need_weights: bool = False,
    ) -> tuple[Decoded, DecoderWeights]:
        """Run T new positions (B, T, D) through every layer, after the L in ``cache``; the
        attention weights of every layer when ``need_weights`` (else empty lists).

        ``self_mask`` defaults to causal; with a cache, its memory keys/values are used.
        """
        offset = 0 if cache is None else cache.length
        if self_mask is None and x.size(1) > 1:
            self_mask = masks.causal_mask(x.size(1), offset=offset, device=x.device)
        memory_kv = memory_kv if cache is None else cache.memory
        self_kv, self_weights, cross_weights = [], [], []
        for i, layer in enumerate(self.layers):
            x, kv, self_w, cross_w = layer(
                x,
                self_mask=self_mask,
                memory_kv=memory_kv[i] if memory_kv else None,
                cross_mask=cross_mask,
                past=None if cache is None else cache.self_attn[i],
                need_weights=need_weights,
            )
            self_kv.append(kv)
            self_weights += [self_w] if self_w is not None else []
            cross_weights += [cross_w] if cross_w is not None else []
        if self.final_norm is not None:
            x = self.final_norm(x)
        new_cache = None if cache is None else cache.advanced(tuple(self_kv), x.size(1))
        return Decoded(x, new_cache), (self_weights, cross_weights)

    # --8<-- [end:decoder]


class EmbeddingWithPositions(nn.Module):
    """Scaled token embedding + positional encoding, then dropout (§3.4, §3.5, §5.4)."""

    def __init__(self, *, tokens: TokenEmbedding, positions: nn.Module, dropout: nn.Module):
        super().__init__()
        self.tokens = tokens
        self.positions = positions
        self.dropout = dropout

    def forward(self, ids: Tensor, offset: int = 0) -> Tensor:
        """(B, T) ids at positions offset .. offset+T-1 -> (B, T, D)."""
        if ids.is_floating_point() or ids.dtype == torch.bool:
            raise TypeError(f"token ids must be an integer tensor, got {ids.dtype}")
        return self.dropout(self.tokens(ids) + self.positions(ids.size(1), offset))


class AttentionMaps(NamedTuple):
    """Attention weights of one forward pass, one (B, H, Tq, Tk) tensor per layer."""

    encoder_self: list[Tensor]  # (B, H, S, S)
    decoder_self: list[Tensor]  # (B, H, T, T)
    decoder_cross: list[Tensor]  # (B, H, T, S)


class Transformer(nn.Module):
    """Encoder–decoder Transformer. Returns logits; loss and search live elsewhere.

    ``encode`` the source once, ``decode`` target positions into hidden states (all at once,
    or a few at a time with a ``KVCache``), and turn hidden states into ``logits``.
    """

    def __init__(
        self,
        *,
        src_embed: EmbeddingWithPositions,
        tgt_embed: EmbeddingWithPositions,
        encoder: Encoder,
        decoder: Decoder,
        output: OutputProjection,
        specials: SpecialIds,
        profile: Profile,
    ):
        super().__init__()
        self.src_embed = src_embed
        self.tgt_embed = tgt_embed
        self.encoder = encoder
        self.decoder = decoder
        self.output = output
        self.specials = specials
        self.profile = profile

    def source_mask(self, src: Tensor) -> Tensor:
        """(B, S) ids -> (B, 1, 1, S) bool padding mask for encoder and cross attention."""
        return masks.padding_mask(src, self.specials.pad)

    def encode(self, src: Tensor, src_mask: Tensor | None = None) -> Tensor:
        """(B, S) source ids -> (B, S, D) memory."""
        mask = self.source_mask(src) if src_mask is None else src_mask
        return self.encoder(self.src_embed(src), mask=mask)[0]

    def start_cache(self, memory: Tensor) -> KVCache:
        """An empty cache holding the encoder–decoder keys/values of ``memory``."""
        return KVCache.empty(
            len(self.decoder.layers),
            self.decoder.project_memory(memory),
            store=self.profile.key_values,
        )

    def decode(
        self,
        tgt: Tensor,
        src_mask: Tensor | None,
        *,
        memory: Tensor | None = None,
        cache: KVCache | None = None,
        tgt_mask: Tensor | None = None,
    ) -> Decoded:
        """Final decoder states of T target positions, after the L positions in ``cache``.

        Args:
            tgt: (B, T) target ids at positions L .. L+T-1.
            src_mask: (B, 1, 1, S) source padding mask.
            memory: (B, S, D) encoder output; needed without a cache (a cache already holds
                the encoder–decoder keys/values, from ``start_cache``).
            cache: keys/values of earlier positions, or None to decode without one.
            tgt_mask: self-attention mask broadcastable to (B, H, T, L+T); default causal.

        Returns:
            (B, T, D) hidden states, and the cache extended by T positions (None without).
        """
        return self._decode(tgt, src_mask, memory=memory, cache=cache, tgt_mask=tgt_mask)[0]

    def logits(self, hidden: Tensor) -> Tensor:
        """(B, T, D) hidden states -> (B, T, V) next-token logits (§3.4)."""
        return self.output(hidden)

    # --8<-- [start:forward]
    def forward(self, src: Tensor, tgt: Tensor) -> Tensor:
        """Teacher-forced logits: (B, S) source, (B, T) decoder input -> (B, T, V)."""
        src_mask = self.source_mask(src)
        memory = self.encode(src, src_mask)
        tgt_mask = masks.decoder_self_mask(tgt, self.specials.pad)
        return self.logits(self.decode(tgt, src_mask, memory=memory, tgt_mask=tgt_mask).hidden)

    # --8<-- [end:forward]

    def forward_with_attention(self, src: Tensor, tgt: Tensor) -> tuple[Tensor, AttentionMaps]:
        """Like ``forward`` through the eager attention path, also returning every weight."""
        src_mask = self.source_mask(src)
        memory, enc_weights = self.encoder(self.src_embed(src), mask=src_mask, need_weights=True)
        tgt_mask = masks.decoder_self_mask(tgt, self.specials.pad)
        out, (self_weights, cross_weights) = self._decode(
            tgt, src_mask, memory=memory, tgt_mask=tgt_mask, need_weights=True
        )
        return self.logits(out.hidden), AttentionMaps(enc_weights, self_weights, cross_weights)

    def _decode(
        self,
        tgt: Tensor,
        src_mask: Tensor | None,
        *,
        memory: Tensor | None,
        cache: KVCache | None = None,
        tgt_mask: Tensor | None = None,
        need_weights: bool = False,
    ) -> tuple[Decoded, DecoderWeights]:
        if cache is None and memory is None:
            raise ValueError("decode needs the encoder output or a cache started from it")
        return self.decoder(
            self.tgt_embed(tgt, offset=0 if cache is None else cache.length),
            cache=cache,
            self_mask=tgt_mask,
            memory_kv=self.decoder.project_memory(memory) if cache is None else (),
            cross_mask=src_mask,
            need_weights=need_weights,
        )
