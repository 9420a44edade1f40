"""Profiles: which implementation of each swappable part a model is built and run with.

``reference`` is the paper's plain code (``aiayn.modules``); ``fast`` swaps in this
package's measured tricks, each computing the same function behind the same interface.
A model is built with one profile (``aiayn.models.build_model(cfg, profile=...)``);
decoding (``aiayn.decode.stepper_for``) and the training loss (``aiayn.train.tasks``) read
``model.profile.name`` to choose their own parts.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from torch import nn

from aiayn.accel.attention import cpu_attention
from aiayn.accel.dropout import UniformDropout
from aiayn.accel.kv_buffer import KeyValueBuffer
from aiayn.accel.shared_memory import BeamSharedCrossAttention
from aiayn.modules import ConcatKeyValues, CrossAttention, scaled_dot_product_attention
from aiayn.modules.attention import AttentionFunction

ProfileName = Literal["reference", "fast"]


@dataclass(frozen=True)
class Profile:
    name: ProfileName
    attention: AttentionFunction  # scaled dot-product attention (§3.2.1)
    dropout: type[nn.Module]  # dropout (§5.4), built with its probability
    cross_attention: type[CrossAttention]  # encoder–decoder attention (§3.2.3)
    key_values: type  # a decoder layer's self-attention cache (a ``KeyValues``)
    fused_optimizer: bool  # Adam(W) in PyTorch's fused kernel (``aiayn.train.optim``)


PROFILES: dict[str, Profile] = {
    "reference": Profile(
        "reference",
        scaled_dot_product_attention,
        nn.Dropout,
        CrossAttention,
        ConcatKeyValues,
        fused_optimizer=False,
    ),
    "fast": Profile(
        "fast",
        cpu_attention,
        UniformDropout,
        BeamSharedCrossAttention,
        KeyValueBuffer,
        fused_optimizer=True,
    ),
}
DEFAULT_PROFILE: ProfileName = "fast"


def get_profile(name: str) -> Profile:
    try:
        return PROFILES[name]
    except KeyError:
        raise ValueError(f"unknown profile {name!r}; choose from {sorted(PROFILES)}") from None
