"""Label-smoothed cross-entropy over non-pad tokens (§5.4, "Label Smoothing").

Shapes: N tokens, V vocabulary.
"""

from __future__ import annotations

from torch import Tensor


def label_smoothed_nll(
    logits: Tensor, target: Tensor, *, epsilon: float, ignore_index: int
) -> tuple[Tensor, Tensor]:
    """Summed label-smoothed loss and summed negative log-likelihood of the real tokens.

    The smoothed target puts 1 - ε on the reference and spreads ε uniformly over the whole
    vocabulary (Szegedy et al., 2016), the definition of ``F.cross_entropy(label_smoothing=ε)``:

        loss = (1 - ε) · (-log p(y)) + ε · mean_v(-log p(v))

    Args:
        logits: (N, V) scores (any float dtype; reduced in float32).
        target: (N,) reference ids.
        epsilon: ε_ls.
        ignore_index: the padding id, which contributes nothing.

    Returns:
        (loss_sum, nll_sum), both scalars over the tokens that are not ``ignore_index``.
    """
    lprobs = logits.float().log_softmax(dim=-1)  # (N, V)
    real = target != ignore_index  # (N,)
    nll = -lprobs.gather(-1, target.unsqueeze(-1)).squeeze(-1)  # (N,)
    uniform = -lprobs.mean(dim=-1)  # (N,)
    loss = (1.0 - epsilon) * nll + epsilon * uniform
    return loss[real].sum(), nll[real].sum()
