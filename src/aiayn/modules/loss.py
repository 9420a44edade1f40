"""Label-smoothed cross-entropy (§5.4, "Label Smoothing") from a model's final states.

The smoothed target puts 1 - ε on the reference and spreads ε uniformly over the whole
vocabulary (Szegedy et al., 2016), the definition of ``F.cross_entropy(label_smoothing=ε)``:

    loss = (1 - ε) · (-log p(y)) + ε · mean_v(-log p(v))

``label_smoothed_nll`` is the plain computation; ``aiayn.accel.fused_loss`` computes the
same function without materialising the logits, for the fast profile.

Shapes: N target tokens, D d_model, V vocabulary.
"""

from __future__ import annotations

from collections.abc import Callable

import torch.nn.functional as F
from torch import Tensor

from aiayn.modules.embedding import OutputProjection

LossFunction = Callable[..., tuple[Tensor, Tensor]]  # label_smoothed_nll's signature


# --8<-- [start:label_smoothed_nll]
def label_smoothed_nll(
    hidden: Tensor, output: OutputProjection, target: Tensor, *, epsilon: float
) -> tuple[Tensor, Tensor]:
    """Summed label-smoothed loss and summed NLL (no gradient) of ``softmax(output(hidden))``.

    Args:
        hidden: (N, D) final decoder states of the real target positions.
        output: the model's pre-softmax projection (§3.4).
        target: (N,) reference ids.
        epsilon: ε_ls.
    """
    logits = output(hidden).float()  # (N, V)
    loss = F.cross_entropy(logits, target, label_smoothing=epsilon, reduction="sum")
    nll = F.cross_entropy(logits.detach(), target, reduction="sum")
    return loss, nll


# --8<-- [end:label_smoothed_nll]
