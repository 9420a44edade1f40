"""Write an aiayn Transformer as a CTranslate2 model, so both decode the very same weights.

Used by ``bench/decode.py``; needs ``pip install ctranslate2`` (not a dependency of aiayn).
Token i of the exported vocabulary is the string ``VOCAB_TOKENS[i]``: PAD, UNK, BOS and EOS
keep aiayn's ids 0–3 under CTranslate2's names.
"""

from __future__ import annotations

import numpy as np
import torch
from torch import nn

SPECIALS = ["<blank>", "<unk>", "<s>", "</s>"]  # aiayn's PAD, UNK, BOS, EOS (ids 0-3)
MAX_POSITIONS = 512


def vocab_tokens(size: int) -> list[str]:
    return SPECIALS + [f"t{i}" for i in range(len(SPECIALS), size)]


def export(model, out_dir: str, *, quantization: str | None = None) -> None:
    """Convert ``model`` (an aiayn post- or pre-norm Transformer, ReLU FFN) to ``out_dir``."""
    import ctranslate2
    from ctranslate2.specs import common_spec, transformer_spec

    norm_first = model.encoder.final_norm is not None
    spec = transformer_spec.TransformerSpec.from_config(
        (len(model.encoder.layers), len(model.decoder.layers)),
        model.encoder.layers[0].self_attn.n_heads,
        pre_norm=norm_first,
        activation=common_spec.Activation.RELU,
    )
    spec.config.layer_norm_epsilon = model.encoder.layers[0].ffn_connection.norm.eps
    _set_stack(spec.encoder, model.src_embed, model.encoder)
    _set_stack(spec.decoder, model.tgt_embed, model.decoder)
    _set_linear(spec.decoder.projection, model.output.proj)
    for layer_spec, layer in zip(spec.encoder.layer, model.encoder.layers, strict=True):
        _set_attention(layer_spec.self_attention, layer.self_attn, layer.self_attn_connection)
        _set_ffn(layer_spec.ffn, layer.ffn, layer.ffn_connection)
    for layer_spec, layer in zip(spec.decoder.layer, model.decoder.layers, strict=True):
        _set_attention(layer_spec.self_attention, layer.self_attn, layer.self_attn_connection)
        _set_cross_attention(layer_spec.attention, layer.cross_attn, layer.cross_attn_connection)
        _set_ffn(layer_spec.ffn, layer.ffn, layer.ffn_connection)
    spec.register_source_vocabulary(vocab_tokens(model.src_embed.tokens.weight.size(0)))
    spec.register_target_vocabulary(vocab_tokens(model.output.proj.weight.size(0)))

    class _Loaded(ctranslate2.converters.Converter):
        def _load(self):
            return spec

    _Loaded().convert(out_dir, quantization=quantization, force=True)


def _array(t: torch.Tensor) -> np.ndarray:
    return t.detach().float().cpu().numpy()


def _set_stack(spec, embed, stack) -> None:
    embeddings = spec.embeddings[0] if isinstance(spec.embeddings, list) else spec.embeddings
    embeddings.weight = _array(embed.tokens.weight)
    spec.scale_embeddings = True  # × √d_model (§3.4)
    table = embed.positions(MAX_POSITIONS)  # (MAX_POSITIONS, D)
    spec.position_encodings.encodings = _array(table)
    if stack.final_norm is not None:
        _set_norm(spec.layer_norm, stack.final_norm)


def _set_attention(spec, attn, connection) -> None:
    _set_linear(spec.linear[0], attn.qkv_proj)  # fused [W_Q; W_K; W_V], the same layout
    _set_linear(spec.linear[1], attn.out_proj)
    _set_norm(spec.layer_norm, connection.norm)


def _set_cross_attention(spec, attn, connection) -> None:
    _set_linear(spec.linear[0], attn.q_proj)
    _set_linear(spec.linear[1], attn.kv_proj)  # fused [W_K; W_V], the same layout
    _set_linear(spec.linear[2], attn.out_proj)
    _set_norm(spec.layer_norm, connection.norm)


def _set_ffn(spec, ffn, connection) -> None:
    _set_linear(spec.linear_0, ffn.w_1)
    _set_linear(spec.linear_1, ffn.w_2)
    _set_norm(spec.layer_norm, connection.norm)


def _set_linear(spec, linear: nn.Linear) -> None:
    spec.weight = _array(linear.weight)
    if linear.bias is not None:
        spec.bias = _array(linear.bias)


def _set_norm(spec, norm: nn.LayerNorm) -> None:
    spec.gamma = _array(norm.weight)
    spec.beta = _array(norm.bias) if norm.bias is not None else np.zeros_like(spec.gamma)
