"""Token embeddings and the pre-softmax projection (§3.4).

Shapes: B batch, T length, D d_model, V vocabulary.
"""

from __future__ import annotations

import math

from torch import Tensor, nn


# --8<-- [start:token_embedding]
class TokenEmbedding(nn.Module):
    """Learned embeddings multiplied by √d_model (§3.4)."""

    def __init__(self, *, vocab_size: int, d_model: int, pad_id: int):
        super().__init__()
        self.embedding = nn.Embedding(vocab_size, d_model, padding_idx=pad_id)
        self.scale = math.sqrt(d_model)

    @property
    def weight(self) -> nn.Parameter:
        return self.embedding.weight

    def forward(self, tokens: Tensor) -> Tensor:
        """(B, T) ids -> (B, T, D)."""
        return self.embedding(tokens) * self.scale


# --8<-- [end:token_embedding]


# --8<-- [start:output_projection]
class OutputProjection(nn.Module):
    """The pre-softmax linear transformation; its weight may be the target embedding (§3.4).

    ``weight`` (V, D) and ``bias`` (V,) or None are its public parts: a loss or a decoder
    that computes the logits its own way reads them here.
    """

    def __init__(
        self,
        *,
        d_model: int,
        vocab_size: int,
        tied_to: TokenEmbedding | None = None,
        bias: bool = False,
    ):
        super().__init__()
        self.proj = nn.Linear(d_model, vocab_size, bias=bias)
        if tied_to is not None:
            self.proj.weight = tied_to.weight

    @property
    def weight(self) -> nn.Parameter:
        return self.proj.weight

    @property
    def bias(self) -> nn.Parameter | None:
        return self.proj.bias

    def forward(self, x: Tensor) -> Tensor:
        """(B, T, D) -> (B, T, V) logits."""
        return self.proj(x)


# --8<-- [end:output_projection]
