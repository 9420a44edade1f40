"""Hugging Face Marian's names of aiayn's parameters: what the Marian import
(``aiayn.interop.marian``) reads and the Hugging Face export (``aiayn.interop.hf``), its
inverse, writes, keyed by the parts of ``aiayn.modules.parameters``."""

from __future__ import annotations

from aiayn.modules import parameters as parts

KINDS = ("weight", "bias")  # the order of ``parts.Part.names``

# Marian's (transformers' MarianMTModel's) modules of each part of a layer
# (``aiayn.modules.parameters``): an attention block's maps, which aiayn stacks by rows into
# one weight ([W_Q; W_K; W_V], [W_K; W_V]), or the module itself.
MARIAN_LAYER: dict[parts.Part, tuple[str, ...]] = {
    parts.SELF_QKV: ("self_attn", "q_proj", "k_proj", "v_proj"),
    parts.SELF_OUT: ("self_attn", "out_proj"),
    parts.SELF_NORM: ("self_attn_layer_norm",),
    parts.CROSS_Q: ("encoder_attn", "q_proj"),
    parts.CROSS_KV: ("encoder_attn", "k_proj", "v_proj"),
    parts.CROSS_OUT: ("encoder_attn", "out_proj"),
    parts.CROSS_NORM: ("encoder_attn_layer_norm",),
    parts.FFN_1: ("fc1",),
    parts.FFN_2: ("fc2",),
    parts.FFN_NORM: ("final_layer_norm",),
}
MARIAN_MODEL = {  # the model's own parts: Marian's weight of each
    parts.SRC_EMBED: "model.encoder.embed_tokens.weight",
    parts.TGT_EMBED: "model.decoder.embed_tokens.weight",
    parts.OUTPUT: "lm_head.weight",
}
MARIAN_SHARED, MARIAN_LOGITS_BIAS = "model.shared.weight", "final_logits_bias"
MARIAN_PARTS = {
    "": tuple(MARIAN_MODEL),
    "encoder": tuple(MARIAN_LAYER),
    "decoder": tuple(MARIAN_LAYER),
}
"""What a Marian model has: an aiayn parameter of any other part has no counterpart."""


def marian_modules(part: parts.Part) -> list[str]:
    """Marian's modules of a layer's ``part``, in the order aiayn stacks them."""
    block, *maps = MARIAN_LAYER[part]
    return [f"{block}.{name}" for name in maps] or [block]


def marian_layer_parts(stack: str) -> tuple[parts.Part, ...]:
    """The parts of a layer of ``stack`` ("encoder", "decoder") that Marian has."""
    return tuple(part for part in parts.TABLE[stack] if part in MARIAN_LAYER)


def marian_layer_prefix(stack: str, index: int) -> str:
    """What Marian's names of layer ``index`` of ``stack`` start with."""
    return f"model.{parts.layer_prefix(stack, index)}"
