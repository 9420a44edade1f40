"""The decoder-only language model: the paper's decoder without encoder–decoder attention.

Shapes: B batch, T new positions, L cached length, D d_model, V vocabulary.
"""

from __future__ import annotations

from torch import Tensor, nn

from aiayn.accel import Profile
from aiayn.config import SpecialIds
from aiayn.models.transformer import Decoded, Decoder, EmbeddingWithPositions
from aiayn.modules import KVCache, OutputProjection


class TransformerLM(nn.Module):
    """Token embedding (× √d_model) + positions, N decoder layers with causal self-attention
    only, a final LayerNorm when pre-norm, and an output projection tied to the embedding."""

    def __init__(
        self,
        *,
        embed: EmbeddingWithPositions,
        decoder: Decoder,
        output: OutputProjection,
        max_context: int | None,
        specials: SpecialIds,
        profile: Profile,
    ):
        super().__init__()
        self.embed = embed
        self.decoder = decoder
        self.output = output
        self.max_context = max_context  # None: any length (sinusoidal positions)
        self.specials = specials
        self.profile = profile

    def start_cache(self) -> KVCache:
        return KVCache.empty(len(self.decoder.layers), store=self.profile.key_values)

    def decode(self, tokens: Tensor, *, cache: KVCache | None = None) -> Decoded:
        """Final states (B, T, D) of T new tokens after the L in ``cache``, and the cache
        extended by T (None without a cache)."""
        offset = 0 if cache is None else cache.length
        return self.decoder(self.embed(tokens, offset=offset), cache=cache)[0]

    def logits(self, hidden: Tensor) -> Tensor:
        """(B, T, D) hidden states -> (B, T, V) next-token logits."""
        return self.output(hidden)

    def forward(self, tokens: Tensor) -> Tensor:
        """(B, T) ids -> (B, T, V) logits; position t predicts token t + 1."""
        return self.logits(self.decode(tokens).hidden)
