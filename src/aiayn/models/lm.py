"""The decoder-only language model: the paper's decoder without encoder–decoder attention.

Shapes: B batch, T new positions, L cached length, D d_model, V vocabulary.
"""

from __future__ import annotations

from torch import Tensor, nn

from aiayn import masks
from aiayn.models.transformer import Decoder, EmbeddingWithPositions
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
    ):
        super().__init__()
        self.embed = embed
        self.decoder = decoder
        self.output = output
        self.max_context = max_context  # None: any length (sinusoidal positions)

    def start_cache(self) -> KVCache:
        return KVCache.empty(len(self.decoder.layers))

    def hidden_states(self, tokens: Tensor, *, cache: KVCache | None = None) -> tuple:
        """Final states (B, T, D) of T new tokens after the L in ``cache``, and the new cache."""
        cache = self.start_cache() if cache is None else cache
        steps = tokens.size(1)
        mask = (
            masks.causal_mask(steps, offset=cache.length, device=tokens.device)
            if steps > 1
            else None
        )
        out = self.decoder(self.embed(tokens, offset=cache.length), self_mask=mask, cache=cache)
        return out.x, cache.advanced(out.self_kv, steps)

    def decode(self, tokens: Tensor, *, cache: KVCache | None = None) -> tuple[Tensor, KVCache]:
        """(B, T, V) next-token logits for T new tokens, and the cache extended by T."""
        hidden, cache = self.hidden_states(tokens, cache=cache)
        return self.output(hidden), cache

    def forward(self, tokens: Tensor) -> Tensor:
        """(B, T) ids -> (B, T, V) logits; position t predicts token t + 1."""
        logits, _ = self.decode(tokens)
        return logits
