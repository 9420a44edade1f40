"""The one switch: a profile carries every swappable part of building, decoding and training
a model, as values.

``reference`` is the paper's plain code (``aiayn.modules``); ``fast`` swaps in this
package's measured tricks, each computing the same function behind the same interface.
A model is built with one profile (``aiayn.models.build_model(cfg, profile=...)``) and keeps
it (``model.profile``): decoding takes its stepper, best-extension and argmax functions from
there, training its loss and optimiser kernel. ``PROFILES`` is the only place that names
them; everything else looks a name up with ``get_profile``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from torch import Tensor, nn

from aiayn.accel.attention import cpu_attention
from aiayn.accel.dropout import UniformDropout
from aiayn.accel.fused_loss import fused_loss
from aiayn.accel.kv_buffer import KeyValueBuffer
from aiayn.accel.shared_memory import BeamSharedCrossAttention
from aiayn.accel.stepper import fast_stepper
from aiayn.accel.topk import best_extensions, plain_argmax, plain_extensions, row_argmax
from aiayn.errors import AiaynError
from aiayn.modules import ConcatKeyValues, CrossAttention, scaled_dot_product_attention
from aiayn.modules.attention import AttentionFunction
from aiayn.modules.loss import LossFunction, label_smoothed_nll
from aiayn.modules.stepper import Precision, StepDecoder, StepperFactory, plain_stepper

ExtensionsFunction = Callable[[Tensor, Tensor, int], tuple[Tensor, Tensor, Tensor]]
ArgmaxFunction = Callable[[Tensor], Tensor]


class ProfileError(AiaynError, ValueError):
    """A profile name that ``PROFILES`` does not have."""


@dataclass(frozen=True)
class Profile:
    name: str  # its key in PROFILES, for logs
    attention: AttentionFunction  # scaled dot-product attention (§3.2.1)
    dropout: type[nn.Module]  # dropout (§5.4), built with its probability
    cross_attention: type[CrossAttention]  # encoder–decoder attention (§3.2.3)
    key_values: type  # a decoder layer's self-attention cache (a ``KeyValues``)
    loss: LossFunction  # label-smoothed loss from final states (§5.4)
    extensions: ExtensionsFunction  # a beam search's best extensions (``plain_extensions``)
    argmax: ArgmaxFunction  # greedy search's best token per row
    stepper: StepperFactory  # the ``StepDecoder`` search decodes through
    fused_optimizer: bool  # Adam(W) in PyTorch's fused kernel (``aiayn.train.optim``)


REFERENCE = Profile(
    name="reference",
    attention=scaled_dot_product_attention,
    dropout=nn.Dropout,
    cross_attention=CrossAttention,
    key_values=ConcatKeyValues,
    loss=label_smoothed_nll,
    extensions=plain_extensions,
    argmax=plain_argmax,
    stepper=plain_stepper,
    fused_optimizer=False,
)
FAST = Profile(
    name="fast",
    attention=cpu_attention,
    dropout=UniformDropout,
    cross_attention=BeamSharedCrossAttention,
    key_values=KeyValueBuffer,
    loss=fused_loss,
    extensions=best_extensions,
    argmax=row_argmax,
    stepper=fast_stepper,
    fused_optimizer=True,
)
PROFILES: dict[str, Profile] = {p.name: p for p in (REFERENCE, FAST)}
DEFAULT_PROFILE = FAST.name


def get_profile(profile: str | Profile | None = None) -> Profile:
    """The profile of that name (None: the default); a ``Profile`` is returned as it is.

    Raises:
        ProfileError: no profile has that name (the message lists those that do).
    """
    if isinstance(profile, Profile):
        return profile
    name = DEFAULT_PROFILE if profile is None else profile
    try:
        return PROFILES[name]
    except KeyError:
        raise ProfileError(
            f"unknown profile {name!r} (--profile, run.profile): choose from "
            f"{', '.join(sorted(PROFILES))}"
        ) from None


def stepper_for(model, *, precision: Precision = "fp32", packed: bool = True) -> StepDecoder:
    """The stepper of the model's profile (``model.profile.stepper``), computing in
    ``precision``; ``packed=False`` keeps it on the model's own weights
    (``aiayn.modules.stepper.StepperFactory``)."""
    return model.profile.stepper(model, precision=precision, packed=packed)
