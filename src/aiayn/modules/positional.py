"""Position information (§3.5): fixed sinusoids, or learned position embeddings.

Each class maps a length T and an offset (the number of positions already decoded) to a
(T, D) table that the model adds to the scaled token embeddings.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial

import torch
from torch import Tensor, nn


# --8<-- [start:sinusoid_table]
def sinusoid_table(length: int, d_model: int, *, interleaved: bool = True) -> Tensor:
    """The sinusoidal encodings of positions 0 .. length-1 (§3.5).

        PE(pos, 2i)   = sin(pos / 10000^(2i / d_model))
        PE(pos, 2i+1) = cos(pos / 10000^(2i / d_model))

    Args:
        length: number of positions.
        d_model: encoding size (even).
        interleaved: True for the paper's layout (sin on even, cos on odd dimensions);
            False for the [sin | cos] concatenation of tensor2tensor, fairseq and Marian.

    Returns:
        (length, d_model) float32.
    """
    if d_model % 2:
        raise ValueError(f"sinusoidal encodings need an even d_model, got {d_model}")
    pos = torch.arange(length, dtype=torch.float64)[:, None]  # (T, 1)
    two_i = torch.arange(0, d_model, 2, dtype=torch.float64)  # (D/2,)
    angle = pos / torch.pow(10000.0, two_i / d_model)  # (T, D/2)
    if interleaved:
        table = torch.stack([angle.sin(), angle.cos()], dim=-1).view(length, d_model)  # (T, D)
    else:
        table = torch.cat([angle.sin(), angle.cos()], dim=-1)  # (T, D)
    return table.float()


# --8<-- [end:sinusoid_table]


class SinusoidalPositionalEncoding(nn.Module):
    """Fixed sinusoidal encodings; no parameters, any length."""

    def __init__(self, *, d_model: int, interleaved: bool = True, initial_length: int = 256):
        super().__init__()
        self.d_model = d_model
        self.interleaved = interleaved
        table = sinusoid_table(initial_length, d_model, interleaved=interleaved)
        self.register_buffer("table", table, persistent=False)

    def forward(self, length: int, offset: int = 0) -> Tensor:
        """(T, D) encodings of positions offset .. offset+T-1."""
        end = offset + length
        if end > self.table.size(0):
            grown = sinusoid_table(
                max(end, 2 * self.table.size(0)), self.d_model, interleaved=self.interleaved
            )
            self.table = grown.to(self.table.device)
        return self.table[offset:end]


class LearnedPositionalEmbedding(nn.Module):
    """A learned embedding per position (§3.5 found it nearly identical to sinusoids)."""

    def __init__(self, *, d_model: int, max_positions: int):
        super().__init__()
        self.embedding = nn.Embedding(max_positions, d_model)

    def forward(self, length: int, offset: int = 0) -> Tensor:
        """(T, D) embeddings of positions offset .. offset+T-1."""
        end = offset + length
        if end > self.embedding.num_embeddings:
            raise ValueError(
                f"position {end - 1} is beyond the learned table of "
                f"{self.embedding.num_embeddings} positions (max_positions)"
            )
        return self.embedding.weight[offset:end]


POSITIONAL: dict[str, Callable[..., nn.Module]] = {
    "sinusoidal": SinusoidalPositionalEncoding,
    "sinusoidal_concat": partial(SinusoidalPositionalEncoding, interleaved=False),  # [sin | cos]
    "learned": LearnedPositionalEmbedding,
}
