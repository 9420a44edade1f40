"""``aiayn import marian``: a Hugging Face Marian (opus-mt) directory as an aiayn model directory.

Marian models are the paper's post-norm Transformer with a few differences, each of which
aiayn expresses as configuration: [sin | cos] positions (``sinusoidal_concat``), usually the
swish activation, biases on the logits (``final_logits_bias``), their own special ids (EOS 0,
UNK 1, PAD the last id, and decoding starts from PAD), and SentencePiece pieces mapped to ids
by ``vocab.json``. Q, K and V are stacked into aiayn's [W_Q; W_K; W_V] (and [W_K; W_V] for
encoder–decoder attention). Weights are read from ``model.safetensors`` or, with
``weights_only`` (no pickle code runs), from ``pytorch_model.bin``.
"""

from __future__ import annotations

import json
import pickle
import zipfile
from pathlib import Path
from typing import Any

import torch
from safetensors import SafetensorError
from safetensors.torch import load_file

from aiayn.accel import REFERENCE
from aiayn.checks import Number, Rule, Whole
from aiayn.config import ModelConfig, SpecialIds
from aiayn.data.marian_tokenizer import MarianTokenizer
from aiayn.data.tokenizer import TokenizerError
from aiayn.data.tokenizer_files import TOKENIZER_FILE, TokenizerInfo, tokenizer_info_json
from aiayn.errors import AiaynError
from aiayn.files import sha256_file
from aiayn.interop.marian_names import (
    KINDS,
    MARIAN_LOGITS_BIAS,
    MARIAN_MODEL,
    MARIAN_PARTS,
    MARIAN_SHARED,
    marian_layer_parts,
    marian_layer_prefix,
    marian_modules,
)
from aiayn.models import build_model
from aiayn.modules.parameters import OUTPUT, SRC_EMBED, TGT_EMBED, layer_prefix, unhandled
from aiayn.store import save_model
from aiayn.store.card import ModelCard
from aiayn.store.model_dir import ModelLoadError, check_finite

ACTIVATIONS = {"swish": "swish", "silu": "swish", "gelu": "gelu", "relu": "relu"}
REQUIRED = {  # config field -> the only value aiayn supports, for fields it does not map
    "scale_embedding": True,
    "normalize_before": False,
    "normalize_embedding": False,
    "add_final_layer_norm": False,
    "static_position_embeddings": True,
}


class MarianImportError(AiaynError):
    """A Hugging Face directory aiayn cannot import; the message names the file or field."""


def import_marian(
    hf_dir: str | Path, out_dir: str | Path, *, overwrite: bool = False, command: str = ""
) -> Path:
    """Read the Marian model in ``hf_dir`` and write it to ``out_dir`` as an aiayn model
    directory (``translate``, ``serve`` and ``plot attention`` use it unchanged), with a
    model card that names its origin and the licence its own card states."""
    hf = Path(hf_dir)
    config = _read_json(hf / "config.json")
    tokenizer_config = _read_json(hf / "tokenizer_config.json", missing_ok=True)
    separate = bool(tokenizer_config.get("separate_vocabs")) or not config.get(
        "share_encoder_decoder_embeddings", True
    )
    vocab_files = ("vocab.json", "target_vocab.json" if separate else "vocab.json")
    try:
        src_tok = MarianTokenizer(_need(hf, "source.spm"), _need(hf, vocab_files[0]))
        tgt_tok = MarianTokenizer(_need(hf, "target.spm"), _need(hf, vocab_files[1]))
    except TokenizerError as e:
        raise MarianImportError(str(e)) from None
    cfg = model_config(config, src_tok, tgt_tok, where=hf / "config.json")
    _check_vocabulary_ids(hf, vocab_files, (src_tok, tgt_tok), cfg)
    model = build_model(cfg, profile=REFERENCE)
    if unfilled := unhandled(model.state_dict(), MARIAN_PARTS):
        raise MarianImportError(f"{hf}: a Marian model has nothing for aiayn's {unfilled[:3]}")
    weights, weights_file = read_weights(hf)
    state = aiayn_weights(weights, cfg, where=weights_file)
    _check_shapes(state, model.state_dict(), cfg, weights_file=weights_file, config=config)
    model.load_state_dict(state, strict=True)
    names = ["source.spm", "target.spm", *sorted(set(vocab_files))]
    info = TokenizerInfo(
        kind="marian",
        src_file="source.spm",
        tgt_file="target.spm",
        src_vocab_file=vocab_files[0],
        tgt_vocab_file=vocab_files[1],
        src_vocab_size=cfg.src_vocab_size,  # the vocabulary files may list fewer ids
        tgt_vocab_size=cfg.tgt_vocab_size,
        sha256={name: sha256_file(hf / name) for name in names},
        src_lang=str(tokenizer_config.get("source_lang") or ""),
        tgt_lang=str(tokenizer_config.get("target_lang") or ""),
    )
    assets = {name: (hf / name).read_bytes() for name in names}
    assets[TOKENIZER_FILE] = tokenizer_info_json(info).encode()
    card = ModelCard(
        origin=f"Imported from the Hugging Face Marian (opus-mt) model in `{hf}`; its own "
        "card there tells its training data and scores.",
        command=command,
        license=_license(hf / "README.md"),
        limits=_marian_limits(src_tok),
        notes={"Weights": f"`{_weights_file(hf)}`, SHA-256 `{sha256_file(_weights_file(hf))}`"},
    )
    return save_model(model, cfg, out_dir, assets=assets, replace=overwrite, card=card)


def _weights_file(hf: Path) -> Path:
    return (
        hf / "model.safetensors"
        if (hf / "model.safetensors").is_file()
        else (hf / "pytorch_model.bin")
    )


def _license(readme: Path) -> str:
    """The ``license:`` of a Hugging Face card's YAML front matter, or ""."""
    try:
        text = readme.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return ""
    if not text.startswith("---"):
        return ""
    front = text[3:].split("\n---", 1)[0]
    for line in front.splitlines():
        key, sep, value = line.partition(":")
        if sep and key.strip() == "license" and value.strip():
            return f"{value.strip()} (as the original model's card states)"
    return ""


def _marian_limits(src: MarianTokenizer) -> tuple[str, ...]:
    codes = sorted(p for p in src.ids if p.startswith(">>") and p.endswith("<<"))
    if not codes:
        return ()
    shown = ", ".join(codes[:5]) + (", ..." if len(codes) > 5 else "")
    return (f"Multilingual: each input starts with a target-language token ({shown}).",)


def model_config(
    config: dict[str, Any], src: MarianTokenizer, tgt: MarianTokenizer, *, where: Path
) -> ModelConfig:
    """The aiayn ModelConfig of a Hugging Face ``MarianConfig`` (as its JSON dict).

    Raises:
        MarianImportError: a field with a value aiayn does not support, named.
    """
    for field, value in REQUIRED.items():
        if config.get(field) not in (None, value):
            raise MarianImportError(f"{where}: {field} = {config[field]!r} is not supported")
    for a, b in (
        ("encoder_attention_heads", "decoder_attention_heads"),
        ("encoder_ffn_dim", "decoder_ffn_dim"),
    ):
        if config.get(a) != config.get(b):
            raise MarianImportError(f"{where}: {a} != {b} is not supported")
    activation = config.get("activation_function", "swish")
    if activation not in ACTIVATIONS:
        raise MarianImportError(f"{where}: activation_function = {activation!r} is not supported")
    vocab = _whole(config, "vocab_size", where)
    shared = config.get("share_encoder_decoder_embeddings", True)
    tgt_vocab = vocab
    if not shared and config.get("decoder_vocab_size") is not None:
        tgt_vocab = _whole(config, "decoder_vocab_size", where)
    pad = _whole(config, "pad_token_id", where, minimum=0)
    specials = SpecialIds(
        pad=pad,
        unk=src.unk_id,
        bos=_whole(config, "decoder_start_token_id", where, minimum=0, default=pad),
        eos=_whole(config, "eos_token_id", where, minimum=0),
    )
    for name, value in (("pad_token_id", specials.pad), ("eos_token_id", specials.eos)):
        if value >= min(vocab, tgt_vocab):
            raise MarianImportError(f"{where}: {name} = {value} is outside vocab_size {vocab}")
    try:
        return ModelConfig(
            src_vocab_size=vocab,
            tgt_vocab_size=tgt_vocab,
            d_model=_whole(config, "d_model", where),
            n_heads=_whole(config, "encoder_attention_heads", where),
            d_ff=_whole(config, "encoder_ffn_dim", where),
            n_encoder_layers=_whole(config, "encoder_layers", where),
            n_decoder_layers=_whole(config, "decoder_layers", where),
            dropout=_fraction(config, "dropout", where, 0.1),
            attention_dropout=_fraction(config, "attention_dropout", where, 0.0),
            activation_dropout=_fraction(config, "activation_dropout", where, 0.0),
            activation=ACTIVATIONS[activation],
            norm_first=False,
            positional="sinusoidal_concat",
            share_embeddings=bool(shared),
            tie_output=bool(config.get("tie_word_embeddings", True)),
            output_bias=True,
            specials=specials,
        )
    except (ValueError, TypeError) as e:
        raise MarianImportError(f"{where}: {e}") from None


def read_weights(hf: Path) -> tuple[dict[str, torch.Tensor], Path]:
    """The state dict of ``model.safetensors``, else of ``pytorch_model.bin`` (tensors only:
    ``weights_only``, so no code in a pickle ever runs), and the file it came from.

    Raises:
        MarianImportError: no weights file, a damaged one, one that is not a dict of
            tensors, or a tensor holding NaN or an infinity.
    """
    for name in ("model.safetensors", "pytorch_model.bin"):
        path = hf / name
        if path.is_file():
            break
    else:
        raise MarianImportError(f"{hf}: no model.safetensors or pytorch_model.bin")
    try:
        if path.suffix == ".safetensors":
            state = load_file(str(path))
        else:
            state = torch.load(path, map_location="cpu", weights_only=True)
    except (
        SafetensorError,
        OSError,
        RuntimeError,
        EOFError,
        pickle.UnpicklingError,
        zipfile.BadZipFile,
        ValueError,
        UnicodeDecodeError,
    ) as e:
        reason = " ".join(str(e).split())[:160]
        raise MarianImportError(
            f"{path}: not a weights file aiayn can read ({type(e).__name__}: {reason})"
        ) from None
    if not isinstance(state, dict) or not all(
        isinstance(k, str) and isinstance(v, torch.Tensor) for k, v in state.items()
    ):
        raise MarianImportError(f"{path}: not a state dict (names -> tensors)")
    try:
        check_finite(state, where=path)
    except ModelLoadError as e:
        raise MarianImportError(str(e)) from None
    return state, path


def _check_vocabulary_ids(
    hf: Path, files: tuple[str, str], tokenizers: tuple[MarianTokenizer, ...], cfg: ModelConfig
) -> None:
    """Every id of a vocabulary file must be a row of the model's embedding."""
    sizes = (cfg.src_vocab_size, cfg.tgt_vocab_size)
    for name, tokenizer, size in zip(files, tokenizers, sizes, strict=True):
        if tokenizer.vocab_size > size:
            top = max(tokenizer.ids.values())
            piece = next(p for p, i in tokenizer.ids.items() if i == top)
            raise MarianImportError(
                f"{hf / name}: piece {piece!r} has id {top}, but the model has {size} "
                "embedding rows (config.json vocab_size)"
            )


def _check_shapes(
    state: dict[str, torch.Tensor],
    expected: dict[str, torch.Tensor],
    cfg: ModelConfig,
    *,
    weights_file: Path,
    config: dict,
) -> None:
    """The weights must have the shapes ``config.json`` gives the model."""
    for name, tensor in state.items():
        want = expected.get(name)
        if want is not None and tuple(tensor.shape) != tuple(want.shape):
            sizes = ", ".join(
                f"{field} {config.get(field)}"
                for field in ("vocab_size", "d_model", "encoder_ffn_dim")
            )
            raise MarianImportError(
                f"{weights_file}: a weight for {name} has shape {list(tensor.shape)}, but "
                f"config.json ({sizes}) makes it {list(want.shape)}"
            )


def aiayn_weights(hf: dict[str, torch.Tensor], cfg: ModelConfig, *, where: Path) -> dict:
    """The aiayn state dict of a Hugging Face ``MarianMTModel`` state dict."""
    get = _Getter(hf, where)
    tgt_embed = get(MARIAN_MODEL[TGT_EMBED], MARIAN_SHARED)
    out: dict[str, torch.Tensor] = {
        SRC_EMBED.names()[0]: get(MARIAN_MODEL[SRC_EMBED], MARIAN_SHARED),
        TGT_EMBED.names()[0]: tgt_embed,
    }
    output_weight, output_bias = OUTPUT.names()
    out[output_weight] = get(MARIAN_MODEL[OUTPUT]) if not cfg.tie_output else tgt_embed
    out[output_bias] = get(MARIAN_LOGITS_BIAS).reshape(-1)
    for stack, n in (("encoder", cfg.n_encoder_layers), ("decoder", cfg.n_decoder_layers)):
        for i in range(n):
            theirs = marian_layer_prefix(stack, i)
            for part in marian_layer_parts(stack):
                for ours, kind in zip(part.names(layer_prefix(stack, i)), KINDS, strict=True):
                    pieces = [get(f"{theirs}{module}.{kind}") for module in marian_modules(part)]
                    out[ours] = torch.cat(pieces)  # stacked by rows
    return out


class _Getter:
    """Tensors of a Hugging Face state dict by name (with or without the ``model.`` prefix
    of ``MarianMTModel``), the first of several names that exists."""

    def __init__(self, state: dict[str, torch.Tensor], where: Path):
        self.state, self.where = state, where

    def __call__(self, *names: str) -> torch.Tensor:
        for name in names:
            for key in (name, name.removeprefix("model.")):
                if key in self.state:
                    return self.state[key].float()
        raise MarianImportError(f"{self.where}: the weights have no {names[0]}")


def _field(config: dict, name: str, where: Path) -> Any:
    if name not in config:
        raise MarianImportError(f"{where}: no {name}")
    return config[name]


def _whole(
    config: dict, name: str, where: Path, *, minimum: int = 1, default: int | None = None
) -> int:
    """A whole-number field of ``config.json`` (a JSON integer, at least ``minimum``)."""
    value = config.get(name, default) if default is not None else _field(config, name, where)
    return _checked(value, Whole(minimum), name, where)


def _fraction(config: dict, name: str, where: Path, default: float) -> float:
    """A probability field of ``config.json`` (a number in [0, 1))."""
    value = config.get(name, default)
    if value is None:
        return default
    return float(_checked(value, Number(0.0, 1.0, below=True), name, where))


def _checked(value: Any, rule: Rule, name: str, where: Path) -> Any:
    """``value`` of the field ``name`` if ``rule`` (``aiayn.checks``) allows it.

    Raises:
        MarianImportError: naming the file, the field and what it must be.
    """
    if problem := rule.problem(value):
        raise MarianImportError(f"{where}: {name} {problem}")
    return value


def _need(directory: Path, name: str) -> Path:
    path = directory / name
    if not path.is_file():
        raise MarianImportError(f"{path}: missing (is {directory} a Marian model directory?)")
    return path


def _read_json(path: Path, *, missing_ok: bool = False) -> dict:
    if not path.is_file():
        if missing_ok:
            return {}
        raise MarianImportError(f"{path}: missing (is {path.parent} a Marian model directory?)")
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (ValueError, UnicodeDecodeError) as e:
        raise MarianImportError(f"{path}: not valid JSON ({e})") from None
    if not isinstance(data, dict):
        raise MarianImportError(f"{path}: not a JSON object")
    return data
