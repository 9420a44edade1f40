"""The Transformer's parameters, one table: each part's path in aiayn's modules (as
``state_dict`` names it), the paper's name for it, and the shape of its weight in the
paper's sizes.

The code that reads or writes a model's weights by name goes through this table: the token
step (``aiayn.accel.token_step.layer_weights``), the Marian import (``aiayn.interop.marian``)
and the Hugging Face and CTranslate2 exports (``aiayn.interop.hf``, ``aiayn.interop.ct2``).
Each keys its own names by these parts and refuses a model with a parameter that none of the
parts it handles holds (``unhandled``): a parameter added to a layer fails every one of them
until the table and it say what the parameter is (``tests/test_parameters.py``).

Shapes are PyTorch's (out, in) for a linear map's weight (its bias is (out,)), (d_model,) for
a LayerNorm's weight and bias, (vocabulary, d_model) for an embedding; a size written ``3 h
d_k`` is the product 3 × h × d_k, with d_k = d_v = d_model / h (§3.2.2).
"""

from __future__ import annotations

import math
import re
from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass
from typing import Literal

from torch import nn

Kind = Literal["linear", "norm", "embedding"]
RESIDUAL = "d_model"  # the size of the residual stream (what a permutation of it reorders)


@dataclass(frozen=True)
class Part:
    """One weight (and its bias, if it has one) of the Transformer."""

    path: str  # the module's path in its layer, or in the model for the model's own parts
    kind: Kind
    shape: tuple[str, ...]  # of the weight, in the paper's sizes
    paper: str  # the paper's name for it (PE: learned positions, §3.5 and Table 3 (E))
    stacked: int = 1  # maps stacked by rows in the one weight ([W^Q; W^K; W^V]: 3)

    def of(self, module: nn.Module) -> nn.Module:
        """This part of ``module`` (a layer, or the model for the model's own parts)."""
        return module.get_submodule(self.path)

    def find(self, module: nn.Module) -> nn.Module | None:
        """This part of ``module``, or None where the model has none (a post-norm stack's
        final LayerNorm)."""
        try:
            return module.get_submodule(self.path)
        except AttributeError:
            return None

    def names(self, prefix: str = "") -> tuple[str, str]:
        """The ``state_dict`` names of its weight and its bias, under ``prefix``."""
        return f"{prefix}{self.path}.weight", f"{prefix}{self.path}.bias"

    def weight_shape(self, sizes: Mapping[str, int]) -> tuple[int, ...]:
        """The weight's shape for ``sizes`` (``model_sizes``)."""
        return tuple(
            math.prod(int(f) if f.isdigit() else sizes[f] for f in size.split())
            for size in self.shape
        )


D = RESIDUAL
# --- a layer's parts (§3.1–§3.3) ------------------------------------------------------------
# Part(path in the layer, kind, the weight's shape, the paper's name[, maps stacked])
SELF_QKV = Part("self_attn.qkv_proj", "linear", ("3 h d_k", D), "[W^Q; W^K; W^V] (§3.2.2)", 3)
SELF_OUT = Part("self_attn.out_proj", "linear", (D, "h d_v"), "W^O (§3.2.2)")
SELF_NORM = Part("self_attn_connection.norm", "norm", (D,), "LayerNorm, self-attention")
CROSS_Q = Part("cross_attn.q_proj", "linear", ("h d_k", D), "W^Q, encoder-decoder attention")
CROSS_KV = Part("cross_attn.kv_proj", "linear", ("2 h d_k", D), "[W^K; W^V], encoder-decoder", 2)
CROSS_OUT = Part("cross_attn.out_proj", "linear", (D, "h d_v"), "W^O, encoder-decoder attention")
CROSS_NORM = Part("cross_attn_connection.norm", "norm", (D,), "LayerNorm, encoder-decoder")
FFN_1 = Part("ffn.w_1", "linear", ("d_ff", D), "W_1, b_1 (eq. 2)")
FFN_2 = Part("ffn.w_2", "linear", (D, "d_ff"), "W_2, b_2 (eq. 2)")
FFN_NORM = Part("ffn_connection.norm", "norm", (D,), "LayerNorm, feed-forward")

ENCODER_LAYER = (SELF_QKV, SELF_OUT, SELF_NORM, FFN_1, FFN_2, FFN_NORM)
DECODER_LAYER = (*ENCODER_LAYER[:3], CROSS_Q, CROSS_KV, CROSS_OUT, CROSS_NORM, *ENCODER_LAYER[3:])

# --- the model's own parts (§3.4, §3.5) -----------------------------------------------------
# Part(path in the model, kind, the weight's shape, the paper's name)
SRC_EMBED = Part("src_embed.tokens.embedding", "embedding", ("src_vocab", D), "embedding")
TGT_EMBED = Part("tgt_embed.tokens.embedding", "embedding", ("tgt_vocab", D), "embedding")
SRC_POSITIONS = Part("src_embed.positions.embedding", "embedding", ("max_positions", D), "PE")
TGT_POSITIONS = Part("tgt_embed.positions.embedding", "embedding", ("max_positions", D), "PE")
OUTPUT = Part("output.proj", "linear", ("tgt_vocab", D), "pre-softmax linear transformation")
ENCODER_NORM = Part("encoder.final_norm", "norm", (D,), "LayerNorm after the encoder (pre-norm)")
DECODER_NORM = Part("decoder.final_norm", "norm", (D,), "LayerNorm after the decoder (pre-norm)")

MODEL = (SRC_EMBED, TGT_EMBED, SRC_POSITIONS, TGT_POSITIONS, OUTPUT, ENCODER_NORM, DECODER_NORM)
STACKS = ("encoder", "decoder")
TABLE: dict[str, tuple[Part, ...]] = {"": MODEL, "encoder": ENCODER_LAYER, "decoder": DECODER_LAYER}
"""Every part: the model's own (``""``) and those of each layer of each stack."""

_LAYER_NAME = re.compile(r"(?P<stack>encoder|decoder)\.layers\.(?P<index>\d+)\.(?P<name>.+)")


def layer_prefix(stack: str, index: int) -> str:
    """What the ``state_dict`` names of layer ``index`` of ``stack`` start with."""
    return f"{stack}.layers.{index}."


def layers(model: nn.Module, stack: str) -> nn.ModuleList:
    """The layers of ``model``'s ``stack`` ("encoder" or "decoder")."""
    return model.get_submodule(f"{stack}.layers")


def parameter_names(parts: Iterable[Part], prefix: str = "") -> set[str]:
    """The ``state_dict`` names the weights and biases of ``parts`` may have."""
    return {name for part in parts for name in part.names(prefix)}


def unhandled(names: Iterable[str], handled: Mapping[str, Collection[Part]]) -> list[str]:
    """The ``state_dict`` names among ``names`` that belong to none of the ``handled`` parts:
    ``handled[""]`` the model's own, ``handled["encoder"]`` / ``["decoder"]`` those of every
    layer of that stack (``TABLE`` handles every part)."""
    own = parameter_names(handled.get("", ()))
    in_layer = {stack: parameter_names(handled.get(stack, ())) for stack in STACKS}
    found = []
    for name in names:
        match = _LAYER_NAME.fullmatch(name)
        known = in_layer[match["stack"]] if match else own
        if (match["name"] if match else name) not in known:
            found.append(name)
    return sorted(found)


def model_sizes(cfg) -> dict[str, int]:
    """The sizes the table's shapes are written in, of a model config (``ModelConfig``: its
    ``d_model``, ``n_heads``, ``d_ff``, vocabulary sizes and ``max_positions``)."""
    d_k = cfg.d_model // cfg.n_heads
    return {
        "d_model": cfg.d_model,
        "h": cfg.n_heads,
        "d_k": d_k,
        "d_v": d_k,
        "d_ff": cfg.d_ff,
        "src_vocab": cfg.src_vocab_size,
        "tgt_vocab": cfg.tgt_vocab_size,
        "max_positions": cfg.max_positions,
    }
