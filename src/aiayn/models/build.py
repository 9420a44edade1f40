"""The one place where a config meets the modules: ``build_model`` and ``init_weights``.

A model is built with a profile (``aiayn.accel.PROFILES``): the paper's plain modules, or
the same functions with measured speed tricks (the default). Both have the same
parameters, so weights load into either.
"""

from __future__ import annotations

import math

import torch
from torch import nn

from aiayn.accel import Profile, get_profile
from aiayn.config import ModelConfig
from aiayn.models.lm import TransformerLM
from aiayn.models.transformer import Decoder, EmbeddingWithPositions, Encoder, Transformer
from aiayn.modules import (
    POSITIONAL,
    CrossAttention,
    DecoderLayer,
    EncoderLayer,
    OutputProjection,
    PositionwiseFeedForward,
    SelfAttention,
    TokenEmbedding,
)
from aiayn.modules.layers import SublayerConnection


def build_model(
    cfg: ModelConfig, *, profile: str | Profile | None = None
) -> Transformer | TransformerLM:
    """Build and initialise the model ``cfg`` describes: the encoder–decoder Transformer,
    or with ``n_encoder_layers == 0`` the decoder-only language model (its vocabulary is
    ``tgt_vocab_size``). ``profile``: a ``Profile``, or its name (``aiayn.accel.get_profile``;
    None: the default)."""
    if cfg.tgt_vocab_size <= 0 or (cfg.is_encoder_decoder and cfg.src_vocab_size <= 0):
        raise ValueError("set the vocabulary sizes (ModelConfig.with_vocab)")
    parts = _Parts(cfg, get_profile(profile))
    pad = cfg.specials.pad
    tgt_tokens = TokenEmbedding(vocab_size=cfg.tgt_vocab_size, d_model=cfg.d_model, pad_id=pad)
    decoder = Decoder(
        layers=[
            parts.decoder_layer(cross=cfg.is_encoder_decoder) for _ in range(cfg.n_decoder_layers)
        ],
        final_norm=parts.final_norm(),
    )
    if not cfg.is_encoder_decoder:
        model = TransformerLM(
            embed=parts.embed(tgt_tokens),
            decoder=decoder,
            output=parts.output(tgt_tokens),
            max_context=cfg.max_positions if cfg.positional == "learned" else None,
            specials=cfg.specials,
            profile=parts.profile,
        )
    else:
        src_tokens = (
            tgt_tokens
            if cfg.share_embeddings
            else TokenEmbedding(vocab_size=cfg.src_vocab_size, d_model=cfg.d_model, pad_id=pad)
        )
        model = Transformer(
            src_embed=parts.embed(src_tokens),
            tgt_embed=parts.embed(tgt_tokens),
            encoder=Encoder(
                layers=[parts.encoder_layer() for _ in range(cfg.n_encoder_layers)],
                final_norm=parts.final_norm(),
            ),
            decoder=decoder,
            output=parts.output(tgt_tokens),
            specials=cfg.specials,
            profile=parts.profile,
        )
    init_weights(model, d_model=cfg.d_model)
    return model


class _Parts:
    """Makes each part of a model from the config, with the profile's implementations."""

    def __init__(self, cfg: ModelConfig, profile: Profile):
        self.cfg = cfg
        self.profile = profile

    def embed(self, tokens: TokenEmbedding) -> EmbeddingWithPositions:
        cfg = self.cfg
        positional = POSITIONAL[cfg.positional]
        if cfg.positional == "learned":
            positions = positional(d_model=cfg.d_model, max_positions=cfg.max_positions)
        else:
            positions = positional(d_model=cfg.d_model)
        return EmbeddingWithPositions(
            tokens=tokens, positions=positions, dropout=self.profile.dropout(cfg.dropout)
        )

    def encoder_layer(self) -> EncoderLayer:
        return EncoderLayer(
            self_attn=self._attention(SelfAttention),
            self_attn_connection=self._connection(),
            ffn=self._ffn(),
            ffn_connection=self._connection(),
        )

    def decoder_layer(self, *, cross: bool) -> DecoderLayer:
        return DecoderLayer(
            self_attn=self._attention(SelfAttention),
            self_attn_connection=self._connection(),
            cross_attn=self._attention(self.profile.cross_attention) if cross else None,
            cross_attn_connection=self._connection() if cross else None,
            ffn=self._ffn(),
            ffn_connection=self._connection(),
        )

    def output(self, tgt_tokens: TokenEmbedding) -> OutputProjection:
        cfg = self.cfg
        return OutputProjection(
            d_model=cfg.d_model,
            vocab_size=cfg.tgt_vocab_size,
            tied_to=tgt_tokens if cfg.tie_output else None,
            bias=cfg.output_bias,
        )

    def final_norm(self) -> nn.LayerNorm | None:
        """Pre-norm stacks end with a LayerNorm; post-norm layers already end with one."""
        return self._norm() if self.cfg.norm_first else None

    def _attention(self, kind: type[SelfAttention] | type[CrossAttention]):
        cfg = self.cfg
        return kind(
            d_model=cfg.d_model,
            n_heads=cfg.n_heads,
            dropout=cfg.attention_dropout,
            bias=cfg.bias,
            attention=self.profile.attention,
        )

    def _ffn(self) -> PositionwiseFeedForward:
        cfg = self.cfg
        return PositionwiseFeedForward(
            d_model=cfg.d_model,
            d_ff=cfg.d_ff,
            activation=cfg.activation,
            dropout=self.profile.dropout(cfg.activation_dropout),
            bias=cfg.bias,
        )

    def _connection(self) -> SublayerConnection:
        return SublayerConnection(
            norm=self._norm(),
            dropout=self.profile.dropout(self.cfg.dropout),
            norm_first=self.cfg.norm_first,
        )

    def _norm(self) -> nn.LayerNorm:
        return nn.LayerNorm(self.cfg.d_model, eps=self.cfg.layer_norm_eps, bias=self.cfg.bias)


@torch.no_grad()
def init_weights(model: nn.Module, *, d_model: int) -> None:
    """Initialise every parameter of ``model`` once. The paper gives no scheme; we follow
    the choices of tensor2tensor and fairseq, whose Transformers reproduce its results:

    - Linear weights: Xavier/Glorot uniform (fan-in + fan-out), biases zero.
    - W_Q, W_K, W_V (stacked as [W_Q; W_K; W_V], or W_Q and [W_K; W_V]): each d_model × d_model
      block Xavier-uniform with gain 1/√2, as fairseq does; the same bound, √(3 / (2·d_model)),
      as PyTorch's Xavier over the stacked (3·d_model × d_model) matrix. Gain 1 (each block
      as a plain square matrix) learns markedly slower: Multi30k, tiny preset, validation
      NLL 5.17 after 300 updates against 4.33 (RESULTS.md, the recipe's rejected settings).
    - Token embeddings: N(0, d_model^-0.5), padding row zero. After the √d_model scale of
      §3.4 the embedded tokens have unit variance, matching the sinusoids' magnitude; with a
      tied output projection the logits start small.
    - Learned positions: N(0, d_model^-0.5) like the tokens.
    - LayerNorm: weight 1, bias 0 (PyTorch's default, reset here for completeness).
    """
    modules = list(model.modules())
    for module in modules:
        if isinstance(module, nn.Linear):
            nn.init.xavier_uniform_(module.weight)
            if module.bias is not None:
                nn.init.zeros_(module.bias)
        elif isinstance(module, nn.LayerNorm):
            if module.weight is not None:
                nn.init.ones_(module.weight)
            if module.bias is not None:
                nn.init.zeros_(module.bias)
    for module in modules:
        if isinstance(module, (SelfAttention, CrossAttention)):
            _xavier_blocks(module)
    # Embeddings last: a tied output projection shares its weight and keeps this init.
    for module in modules:
        if isinstance(module, nn.Embedding):
            nn.init.normal_(module.weight, mean=0.0, std=d_model**-0.5)
            if module.padding_idx is not None:
                module.weight[module.padding_idx].zero_()


QKV_GAIN = 1.0 / math.sqrt(2.0)


def _xavier_blocks(attention: SelfAttention | CrossAttention) -> None:
    """Xavier-uniform, gain 1/√2, on each (D, D) block of the query/key/value projections."""
    projections = [getattr(attention, name, None) for name in ("qkv_proj", "q_proj", "kv_proj")]
    for linear in projections:
        if linear is None:
            continue
        for block in linear.weight.split(linear.in_features, dim=0):  # each (D, D)
            bound = QKV_GAIN * math.sqrt(6.0 / (block.size(0) + block.size(1)))
            block.uniform_(-bound, bound)
