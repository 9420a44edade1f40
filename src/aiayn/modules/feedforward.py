"""Position-wise feed-forward network (§3.3): FFN(x) = max(0, x W1 + b1) W2 + b2.

Shapes: B batch, T length, D d_model, F d_ff.
"""

from __future__ import annotations

from torch import Tensor, nn

ACTIVATIONS: dict[str, type[nn.Module]] = {"relu": nn.ReLU, "gelu": nn.GELU, "swish": nn.SiLU}


# --8<-- [start:feed_forward]
class PositionwiseFeedForward(nn.Module):
    """Two linear maps with an activation between them, applied to each position alike.

    ``dropout`` acts on the activations (0 in the paper); pass ``nn.Identity()`` for none.
    """

    def __init__(
        self,
        *,
        d_model: int,
        d_ff: int,
        activation: str = "relu",
        dropout: nn.Module | None = None,
        bias: bool = True,
    ):
        super().__init__()
        if activation not in ACTIVATIONS:
            choices = sorted(ACTIVATIONS)
            raise ValueError(f"unknown activation {activation!r}; choose from {choices}")
        self.w_1 = nn.Linear(d_model, d_ff, bias=bias)
        self.activation = ACTIVATIONS[activation]()
        self.dropout = dropout if dropout is not None else nn.Identity()
        self.w_2 = nn.Linear(d_ff, d_model, bias=bias)

    def forward(self, x: Tensor) -> Tensor:
        """(B, T, D) -> (B, T, D)."""
        return self.w_2(self.dropout(self.activation(self.w_1(x))))  # (B, T, F) inside


# --8<-- [end:feed_forward]
