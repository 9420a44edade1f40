"""Position-wise feed-forward network (§3.3): FFN(x) = max(0, x W1 + b1) W2 + b2.

Shapes: B batch, T length, D d_model, F d_ff.
"""

from __future__ import annotations

from torch import Tensor, nn

from aiayn.modules.dropout import Dropout

ACTIVATIONS: dict[str, type[nn.Module]] = {"relu": nn.ReLU, "gelu": nn.GELU, "swish": nn.SiLU}


class PositionwiseFeedForward(nn.Module):
    """Two linear maps with an activation between them, applied to each position alike."""

    def __init__(
        self,
        *,
        d_model: int,
        d_ff: int,
        activation: str = "relu",
        activation_dropout: float = 0.0,
        bias: bool = True,
    ):
        super().__init__()
        if activation not in ACTIVATIONS:
            choices = sorted(ACTIVATIONS)
            raise ValueError(f"unknown activation {activation!r}; choose from {choices}")
        self.w_1 = nn.Linear(d_model, d_ff, bias=bias)
        self.activation = ACTIVATIONS[activation]()
        self.dropout = Dropout(activation_dropout)
        self.w_2 = nn.Linear(d_ff, d_model, bias=bias)

    def forward(self, x: Tensor) -> Tensor:
        """(B, T, D) -> (B, T, D)."""
        return self.w_2(self.dropout(self.activation(self.w_1(x))))  # (B, T, F) inside
