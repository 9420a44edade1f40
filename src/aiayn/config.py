"""Frozen configuration dataclasses, named as in the paper.

This module imports neither torch nor any other aiayn module, so every layer of the
package (and tools that only read configs) can depend on it.
"""

from __future__ import annotations

import dataclasses
import types
import typing
from dataclasses import dataclass
from typing import Any, Literal

# Special token ids: the same in every vocabulary aiayn builds (kept here, and only here).
PAD_ID = 0
UNK_ID = 1
BOS_ID = 2
EOS_ID = 3
SPECIAL_PIECES = {"pad": "<pad>", "unk": "<unk>", "bos": "<s>", "eos": "</s>"}

Activation = Literal["relu", "gelu", "swish"]
Positional = Literal["sinusoidal", "sinusoidal_concat", "learned"]


@dataclass(frozen=True, kw_only=True)
class ModelConfig:
    """Hyper-parameters of the encoder–decoder Transformer (§3, Table 3).

    Vocabulary sizes come from the data; presets leave them at 0 until they are known.
    With ``n_encoder_layers == 0`` the model is the decoder-only language model.
    """

    src_vocab_size: int = 0
    tgt_vocab_size: int = 0
    d_model: int = 512  # d_model
    n_heads: int = 8  # h
    d_ff: int = 2048  # d_ff
    n_encoder_layers: int = 6  # N (encoder)
    n_decoder_layers: int = 6  # N (decoder)
    dropout: float = 0.1  # P_drop (§5.4)
    attention_dropout: float = 0.0  # dropout on the attention weights (not in the paper)
    activation_dropout: float = 0.0  # dropout after the FFN activation (not in the paper)
    activation: Activation = "relu"  # §3.3 uses ReLU
    norm_first: bool = False  # the paper is post-norm: LayerNorm(x + Sublayer(x))
    positional: Positional = "sinusoidal"  # §3.5
    max_positions: int = 1024  # longest sequence a learned position table holds
    share_embeddings: bool = True  # one embedding for source and target (§3.4)
    tie_output: bool = True  # pre-softmax projection = target embedding (§3.4)
    bias: bool = True  # biases in linear layers and LayerNorm
    layer_norm_eps: float = 1e-5

    def __post_init__(self) -> None:
        if self.d_model % self.n_heads:
            raise ValueError(f"d_model={self.d_model} is not divisible by n_heads={self.n_heads}")
        if self.n_decoder_layers < 1:
            raise ValueError("n_decoder_layers must be at least 1")
        for name in ("dropout", "attention_dropout", "activation_dropout"):
            if not 0.0 <= getattr(self, name) < 1.0:
                raise ValueError(f"{name} must be in [0, 1), got {getattr(self, name)}")
        one_vocab = self.src_vocab_size == self.tgt_vocab_size
        if self.share_embeddings and self.is_encoder_decoder and not one_vocab:
            raise ValueError(
                "share_embeddings needs one vocabulary: "
                f"src_vocab_size={self.src_vocab_size} != tgt_vocab_size={self.tgt_vocab_size}"
            )

    @property
    def is_encoder_decoder(self) -> bool:
        return self.n_encoder_layers > 0

    @property
    def d_head(self) -> int:
        """d_k = d_v = d_model / h (§3.2.2)."""
        return self.d_model // self.n_heads

    def with_vocab(self, src_vocab_size: int, tgt_vocab_size: int | None = None) -> ModelConfig:
        """Return a copy with vocabulary sizes filled in (target defaults to source)."""
        tgt = src_vocab_size if tgt_vocab_size is None else tgt_vocab_size
        return dataclasses.replace(self, src_vocab_size=src_vocab_size, tgt_vocab_size=tgt)


# Table 3 sizes, plus the Multi30k Transformer-Tiny of the literature (Wu et al., 2021).
MODEL_PRESETS: dict[str, dict[str, Any]] = {
    "tiny": dict(
        d_model=128, n_heads=4, d_ff=256, n_encoder_layers=4, n_decoder_layers=4, dropout=0.3
    ),
    "base": dict(
        d_model=512, n_heads=8, d_ff=2048, n_encoder_layers=6, n_decoder_layers=6, dropout=0.1
    ),
    "big": dict(
        d_model=1024, n_heads=16, d_ff=4096, n_encoder_layers=6, n_decoder_layers=6, dropout=0.3
    ),
}


def model_preset(name: str, **overrides: Any) -> ModelConfig:
    """Build a ModelConfig from a named preset (``tiny``, ``base``, ``big``) and overrides."""
    try:
        fields = MODEL_PRESETS[name]
    except KeyError:
        raise ValueError(f"unknown preset {name!r}; choose from {sorted(MODEL_PRESETS)}") from None
    return ModelConfig(**{**fields, **overrides})


def config_to_dict(cfg: Any) -> dict[str, Any]:
    """A JSON/TOML-ready dict of a (possibly nested) config dataclass."""
    return dataclasses.asdict(cfg)


def config_from_dict(cls: type, values: dict[str, Any], *, where: str = "config") -> Any:
    """Build the dataclass ``cls`` from ``values``, rejecting unknown keys and wrong types.

    Nested dataclass fields are built recursively. Errors name the offending key.
    """
    fields = {f.name: f for f in dataclasses.fields(cls)}
    unknown = sorted(set(values) - set(fields))
    if unknown:
        raise ConfigError(f"{where}: unknown key(s) {unknown}; known: {sorted(fields)}")
    kwargs: dict[str, Any] = {}
    for key, value in values.items():
        field_type = _resolved_type(cls, key)
        if dataclasses.is_dataclass(field_type):
            if not isinstance(value, dict):
                raise ConfigError(f"{where}.{key}: expected a table, got {type(value).__name__}")
            kwargs[key] = config_from_dict(field_type, value, where=f"{where}.{key}")
        else:
            kwargs[key] = _check_type(value, field_type, f"{where}.{key}")
    try:
        return cls(**kwargs)
    except (TypeError, ValueError) as e:
        raise ConfigError(f"{where}: {e}") from None


class ConfigError(ValueError):
    """A configuration that cannot be used: unknown key, wrong type or bad value."""


def _resolved_type(cls: type, name: str) -> Any:
    return typing.get_type_hints(cls)[name]


def _check_type(value: Any, expected: Any, where: str) -> Any:
    origin = typing.get_origin(expected)
    args = typing.get_args(expected)
    if expected is Any:
        return value
    if origin is Literal:
        if value not in args:
            raise ConfigError(f"{where}: {value!r} is not one of {list(args)}")
        return value
    if origin in (typing.Union, types.UnionType):
        for option in args:
            try:
                return _check_type(value, option, where)
            except ConfigError:
                continue
        raise ConfigError(f"{where}: {value!r} does not match {expected}")
    if expected is type(None):
        if value is not None:
            raise ConfigError(f"{where}: expected none, got {value!r}")
        return value
    if origin in (list, tuple):
        if not isinstance(value, (list, tuple)):
            raise ConfigError(f"{where}: expected a list, got {type(value).__name__}")
        item = args[0] if args else Any
        checked = [_check_type(v, item, where) for v in value]
        return tuple(checked) if origin is tuple else checked
    if expected is float and isinstance(value, int) and not isinstance(value, bool):
        return float(value)
    if expected in (int, float) and isinstance(value, bool):
        raise ConfigError(f"{where}: expected {expected.__name__}, got a boolean")
    if not isinstance(value, expected):
        raise ConfigError(
            f"{where}: expected {expected.__name__}, got {type(value).__name__} ({value!r})"
        )
    return value


@dataclass(frozen=True, kw_only=True)
class PrepareConfig:
    """How ``aiayn prepare`` turns a parallel corpus into a binary dataset.

    Splits are file prefixes: ``PREFIX.{src_lang}`` and ``PREFIX.{tgt_lang}``, each plain
    or with ``.gz`` appended.
    """

    src_lang: str
    tgt_lang: str
    train: str
    valid: str
    test: tuple[str, ...] = ()
    vocab_size: int = 10000
    subword_model: Literal["bpe", "unigram"] = "bpe"
    joint_vocab: bool = True  # one vocabulary for both languages, as the paper (§5.1)
    pretokenized: bool = False  # text is already tokenised (Moses): BLEU on tokens
    byte_fallback: bool = False  # unseen characters become bytes instead of <unk>
    max_len: int = 256  # training pairs with a side longer than this (subwords) are dropped
    max_len_ratio: float = 9.0  # ... or whose length ratio exceeds this
    empty_lines: Literal["drop", "error"] = "drop"
    seed: int = 1

    def __post_init__(self) -> None:
        if self.vocab_size < 8:
            raise ValueError(f"vocab_size must be at least 8, got {self.vocab_size}")
        if self.src_lang == self.tgt_lang:
            raise ValueError(f"source and target languages are both {self.src_lang!r}")
