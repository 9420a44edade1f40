"""``aiayn export ct2``: an aiayn translation model as a CTranslate2 model directory.

The result is what CTranslate2's own ``Translator`` loads: the same weights (Q, K, V already
stacked in CTranslate2's layout), the real vocabulary (the tokenizer's pieces, so that
``translate_batch`` takes the pieces SentencePiece produces), the model's special tokens, and
the source EOS added by CTranslate2 itself. The model's SentencePiece models are copied
beside it (``source.spm``, ``target.spm``), and its model card (``README.md``).
Quantisation (``int8``, ...) is CTranslate2's. Needs ``pip install ctranslate2``.
"""

from __future__ import annotations

import importlib.util
import shutil
from pathlib import Path

import numpy as np
import torch
from torch import nn

from aiayn.data.tokenizer_files import TokenizerInfo, load_tokenizers
from aiayn.files import (
    DestinationError,
    check_destination,
    foreign_entries,
    holds_only,
    write_directory,
)
from aiayn.interop.destination import (
    MARKER_FILE,
    MODEL_CARD,
    ExportError,
    copy_model_card,
    write_marker,
)
from aiayn.models import Transformer
from aiayn.modules import parameters as parts
from aiayn.store import load_model
from aiayn.store.model_dir import is_model_directory

QUANTIZATIONS = ("float32", "int8", "int8_float32", "int8_float16", "int16", "float16", "bfloat16")
ACTIVATIONS = {"relu": "RELU", "gelu": "GELU", "swish": "SWISH"}
MAX_POSITIONS = 1024  # position encodings written out (CTranslate2 needs a table)
SOURCE_SPM, TARGET_SPM = "source.spm", "target.spm"  # beside the model, as opus-mt names them
# The files of an exported CTranslate2 model directory: an existing one is replaced only if
# it holds nothing else (a user's notes or a subdirectory there are never deleted).
CT2_FILES = (
    "model.bin",
    "config.json",
    "*vocabulary*.json",
    "*vocabulary*.txt",
    SOURCE_SPM,
    TARGET_SPM,
    MODEL_CARD,
    MARKER_FILE,
)


def export_ct2(
    model_dir: str | Path,
    out_dir: str | Path,
    *,
    quantization: str | None = None,
    overwrite: bool = False,
) -> Path:
    """Write ``model_dir`` (an aiayn translation model directory) to ``out_dir`` in
    CTranslate2's format."""
    if importlib.util.find_spec("ctranslate2") is None:
        raise ExportError("CTranslate2 is not installed (pip install ctranslate2)")
    out = Path(out_dir)
    _check_out(out, overwrite=overwrite)
    model, _ = load_model(model_dir)
    if not isinstance(model, Transformer):
        raise ExportError(f"{model_dir}: a language model; CTranslate2 export is for translators")
    src_tok, tgt_tok, info = load_tokenizers(model_dir)
    src_vocab = _vocabulary(src_tok, parts.SRC_EMBED.of(model).weight.size(0), model)
    tgt_vocab = _vocabulary(tgt_tok, model.output.weight.size(0), model)
    with write_directory(
        out, replace=overwrite, replaceable=is_ct2_directory, what="CTranslate2 model"
    ) as tmp:
        convert(model, src_vocab, tgt_vocab, str(tmp), quantization=quantization)
        copy_sentencepiece(Path(model_dir), info, tmp)
        copy_model_card(Path(model_dir), tmp)
        write_marker(tmp, "ct2", model_dir)
    return out


is_ct2_directory = holds_only(CT2_FILES, required="model.bin")

# Where CTranslate2's layer spec holds each part of a layer (``aiayn.modules.parameters``):
# its block, the attribute, and the index in a list of maps; Q, K and V are stacked as aiayn
# stacks them.
CT2_LAYER: dict[parts.Part, tuple[str, str] | tuple[str, str, int]] = {
    parts.SELF_QKV: ("self_attention", "linear", 0),
    parts.SELF_OUT: ("self_attention", "linear", 1),
    parts.SELF_NORM: ("self_attention", "layer_norm"),
    parts.CROSS_Q: ("attention", "linear", 0),
    parts.CROSS_KV: ("attention", "linear", 1),
    parts.CROSS_OUT: ("attention", "linear", 2),
    parts.CROSS_NORM: ("attention", "layer_norm"),
    parts.FFN_1: ("ffn", "linear_0"),
    parts.FFN_2: ("ffn", "linear_1"),
    parts.FFN_NORM: ("ffn", "layer_norm"),
}
CT2_MODEL = (
    parts.SRC_EMBED,
    parts.TGT_EMBED,
    parts.SRC_POSITIONS,
    parts.TGT_POSITIONS,
    parts.OUTPUT,
    parts.ENCODER_NORM,
    parts.DECODER_NORM,
)
CT2_PARTS = {"": CT2_MODEL, "encoder": tuple(CT2_LAYER), "decoder": tuple(CT2_LAYER)}
"""What the export writes: a parameter of any other part has no place in CTranslate2's spec."""


def _check_out(out: Path, *, overwrite: bool) -> None:
    """Refuse an ``--out`` that is not free and not a CTranslate2 model (naming what is in
    the way), before the model is loaded."""
    if out.is_dir() and not out.is_symlink() and any(out.iterdir()):
        if is_model_directory(out):
            raise DestinationError(
                f"{out}: an aiayn model directory; write the CTranslate2 model to another path"
            )
        if (out / "model.bin").is_file() and not is_ct2_directory(out):
            foreign = foreign_entries(out, CT2_FILES) or ["a subdirectory or link"]
            raise DestinationError(
                f"{out}: holds files a CTranslate2 export does not write "
                f"({', '.join(foreign[:3])}); they are left alone (choose another path)"
            )
    check_destination(
        out, replace=overwrite, replaceable=is_ct2_directory, what="CTranslate2 model"
    )


def copy_sentencepiece(model_dir: Path, info: TokenizerInfo, directory: Path) -> None:
    """Copy the model's SentencePiece models beside the CTranslate2 model as ``source.spm``
    and ``target.spm`` (CTranslate2 translates pieces: text goes through them on the way in
    and out). A character tokenizer has none."""
    if info.kind == "char":
        return
    for side, name in ((info.src_file, SOURCE_SPM), (info.tgt_file, TARGET_SPM)):
        shutil.copyfile(model_dir / side, directory / name)


def _vocabulary(tokenizer, size: int, model: Transformer) -> list[str]:
    """Token i of the exported vocabulary is the tokenizer's piece i; PAD, BOS, EOS and UNK
    get the names CTranslate2 knows them by."""
    pieces = list(tokenizer.pieces(range(size)))
    s = model.specials
    names = {s.pad: "<blank>", s.unk: "<unk>", s.eos: "</s>"}
    if s.bos != s.pad:
        names[s.bos] = "<s>"
    for i, name in names.items():
        pieces[i] = name
    seen: set[str] = set()
    for i, piece in enumerate(pieces):  # CTranslate2 needs each token once
        if piece in seen:
            pieces[i] = f"<unused{i}>"
        seen.add(pieces[i])
    return pieces


def convert(
    model: Transformer,
    src_vocab: list[str],
    tgt_vocab: list[str],
    out_dir: str,
    *,
    quantization: str | None = None,
) -> None:
    """Convert ``model`` (post- or pre-norm, any aiayn activation) with these vocabularies."""
    import ctranslate2
    from ctranslate2.specs import common_spec, transformer_spec

    if unknown := parts.unhandled(model.state_dict(), CT2_PARTS):
        raise ExportError(f"CTranslate2 has no place for the model's {unknown[:3]}")
    norm_first = parts.ENCODER_NORM.find(model) is not None
    activation = model.encoder.layers[0].ffn.activation
    name = {nn.ReLU: "relu", nn.GELU: "gelu", nn.SiLU: "swish"}[type(activation)]
    spec = transformer_spec.TransformerSpec.from_config(
        (len(model.encoder.layers), len(model.decoder.layers)),
        model.encoder.layers[0].self_attn.n_heads,
        pre_norm=norm_first,
        activation=getattr(common_spec.Activation, ACTIVATIONS[name]),
    )
    spec.config.layer_norm_epsilon = parts.FFN_NORM.of(model.encoder.layers[0]).eps
    spec.config.add_source_eos = True
    s = model.specials
    spec.config.decoder_start_token = tgt_vocab[s.bos]
    spec.config.bos_token = tgt_vocab[s.bos]
    _set_stack(
        spec.encoder, parts.SRC_EMBED.of(model), model.src_embed, parts.ENCODER_NORM.find(model)
    )
    _set_stack(
        spec.decoder, parts.TGT_EMBED.of(model), model.tgt_embed, parts.DECODER_NORM.find(model)
    )
    _set_linear(spec.decoder.projection, parts.OUTPUT.of(model))
    for stack in parts.STACKS:
        for layer_spec, layer in zip(
            getattr(spec, stack).layer, parts.layers(model, stack), strict=True
        ):
            for part in parts.TABLE[stack]:
                _SET[part.kind](_spec_of(layer_spec, part), part.of(layer))
    spec.register_source_vocabulary(src_vocab)
    spec.register_target_vocabulary(tgt_vocab)

    class _Loaded(ctranslate2.converters.Converter):
        def _load(self):
            return spec

    _Loaded().convert(out_dir, quantization=quantization, force=True)


def _array(t: torch.Tensor) -> np.ndarray:
    return t.detach().float().cpu().numpy()


def _set_stack(spec, tokens: nn.Embedding, embed, final_norm: nn.LayerNorm | None) -> None:
    """The stack's embeddings (``embed``: tokens and positions) and final LayerNorm."""
    embeddings = spec.embeddings[0] if isinstance(spec.embeddings, list) else spec.embeddings
    embeddings.weight = _array(tokens.weight)
    spec.scale_embeddings = True  # × √d_model (§3.4)
    spec.position_encodings.encodings = _array(embed.positions(MAX_POSITIONS))  # (P, D)
    if final_norm is not None:
        _set_norm(spec.layer_norm, final_norm)


def _spec_of(layer_spec, part: parts.Part):
    """The spec of ``part`` in CTranslate2's layer spec (``CT2_LAYER``)."""
    block, name, *index = CT2_LAYER[part]
    spec = getattr(getattr(layer_spec, block), name)
    return spec[index[0]] if index else spec


def _set_linear(spec, linear: nn.Linear) -> None:
    spec.weight = _array(linear.weight)
    if linear.bias is not None:
        spec.bias = _array(linear.bias)


def _set_norm(spec, norm: nn.LayerNorm) -> None:
    spec.gamma = _array(norm.weight)
    spec.beta = _array(norm.bias) if norm.bias is not None else np.zeros_like(spec.gamma)


_SET = {"linear": _set_linear, "norm": _set_norm}  # a part's kind: how its spec is set
