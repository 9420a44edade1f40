"""``aiayn export hf``: an aiayn translation model as a Hugging Face Marian directory.

The result is what ``transformers`` loads with ``MarianMTModel.from_pretrained`` (or
``AutoModelForSeq2SeqLM``) and ``AutoTokenizer``, so ``pipeline("translation", model=DIR)``
works. Only exact equivalents are written; a model Marian cannot express is refused, naming
the field:

- Marian's positions are [sin | cos] halves; the paper's interleaved sinusoids are the same
  table with the model's dimensions permuted (dimension k of the Marian model is dimension
  ``PERMUTATION[k]`` of the aiayn one). Every weight that reads or writes the residual stream
  (embeddings, LayerNorms, the projections in and out of it) is permuted along that
  dimension; attention heads and the FFN's inner dimension are untouched, so the logits are
  the same.
- Marian has biases everywhere and a bias on the logits: a model without them gets zeros.
- Marian is post-norm, has fixed positions and LayerNorm's default epsilon; a pre-norm model,
  learned positions or another epsilon have no equivalent.

An aiayn SentencePiece tokenizer becomes Marian's ``source.spm``/``target.spm`` with a
``vocab.json`` mapping each piece to its SentencePiece id; a model imported from Marian
gives back its own files. The model directory's ``README.md`` (model card) is carried along.
Needs ``pip install transformers``.
"""

from __future__ import annotations

import importlib.util
import json
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import sentencepiece as spm
import torch

from aiayn.accel import REFERENCE
from aiayn.config import ModelConfig
from aiayn.data.tokenizer_files import TokenizerInfo, load_tokenizers
from aiayn.decode.guards import EXPORT_NO_REPEAT_NGRAM
from aiayn.files import check_destination, write_directory
from aiayn.interop import marian_names
from aiayn.interop.destination import (
    MODEL_CARD,
    ExportError,
    exported_by_aiayn,
    write_marker,
)
from aiayn.models import Transformer
from aiayn.modules.parameters import OUTPUT, RESIDUAL, SRC_EMBED, Part, layer_prefix, unhandled
from aiayn.store import load_model

MAX_POSITIONS = 1024  # Marian's position table (``max_position_embeddings``)
ACTIVATIONS = {"relu": "relu", "gelu": "gelu", "swish": "swish"}  # aiayn -> transformers
MARIAN_EPS = 1e-5  # transformers' Marian uses nn.LayerNorm's default epsilon


def export_hf(model_dir: str | Path, out_dir: str | Path, *, overwrite: bool = False) -> Path:
    """Write ``model_dir`` (an aiayn translation model directory) to ``out_dir`` as a Hugging
    Face Marian model directory with its tokenizer.

    Raises:
        ExportError: transformers is missing, or the model has no Marian equivalent (the
            message names the field).
        DestinationError: ``out_dir`` holds something aiayn did not export.
    """
    if importlib.util.find_spec("transformers") is None:
        raise ExportError("transformers is not installed (pip install transformers)")
    out = Path(out_dir)
    replaceable = exported_by_aiayn("hf")
    what = "Hugging Face model"
    check_destination(out, replace=overwrite, replaceable=replaceable, what=what)
    model, cfg = load_model(model_dir, profile=REFERENCE)
    if not isinstance(model, Transformer):
        raise ExportError(f"{model_dir}: a language model; Marian is a translation model")
    check_marian(cfg, where=Path(model_dir))
    _, _, info = load_tokenizers(model_dir)
    if info.kind == "char":
        raise ExportError(f"{model_dir}: a character tokenizer; Marian needs SentencePiece models")
    state = marian_weights(model.state_dict(), cfg)
    with (
        write_directory(out, replace=overwrite, replaceable=replaceable, what=what) as tmp,
        _quiet(),
    ):
        _write_model(tmp, cfg, state)
        _write_tokenizer(tmp, Path(model_dir), info, cfg)
        write_hub_card(Path(model_dir), tmp, info)
        write_marker(tmp, "hf", model_dir)
    return out


@contextmanager
def _quiet() -> Iterator[None]:
    """transformers without its progress bars (a CLI command prints its own line)."""
    from transformers.utils import logging as hf_logging

    was = hf_logging.is_progress_bar_enabled()
    hf_logging.disable_progress_bar()
    try:
        yield
    finally:
        if was:
            hf_logging.enable_progress_bar()


def check_marian(cfg: ModelConfig, *, where: str | Path) -> None:
    """Refuse a model Marian cannot express exactly, naming the field."""
    refusals = [
        (cfg.norm_first, "norm_first = true (Marian is post-norm)"),
        (cfg.positional == "learned", "positional = 'learned' (Marian has fixed sinusoids)"),
        (
            cfg.layer_norm_eps != MARIAN_EPS,
            f"layer_norm_eps = {cfg.layer_norm_eps} (Marian's is {MARIAN_EPS})",
        ),
    ]
    for refused, field in refusals:
        if refused:
            raise ExportError(f"{where}: model.{field} has no Marian equivalent")


def permutation(cfg: ModelConfig) -> torch.Tensor:
    """Dimension k of the Marian model is dimension ``permutation(cfg)[k]`` of the aiayn one:
    the identity for [sin | cos] positions; for the paper's interleaved ones, the even
    dimensions (sines) then the odd ones (cosines)."""
    d = cfg.d_model
    if cfg.positional == "sinusoidal_concat":
        return torch.arange(d)
    return torch.cat([torch.arange(0, d, 2), torch.arange(1, d, 2)])  # (D,)


def marian_config(cfg: ModelConfig) -> dict:
    """The ``MarianConfig`` arguments of an aiayn ``ModelConfig``."""
    s = cfg.specials
    return dict(
        vocab_size=cfg.src_vocab_size,
        decoder_vocab_size=cfg.tgt_vocab_size,
        share_encoder_decoder_embeddings=cfg.share_embeddings,
        tie_word_embeddings=cfg.tie_output,
        d_model=cfg.d_model,
        encoder_layers=cfg.n_encoder_layers,
        decoder_layers=cfg.n_decoder_layers,
        encoder_attention_heads=cfg.n_heads,
        decoder_attention_heads=cfg.n_heads,
        encoder_ffn_dim=cfg.d_ff,
        decoder_ffn_dim=cfg.d_ff,
        activation_function=ACTIVATIONS[cfg.activation],
        dropout=cfg.dropout,
        attention_dropout=cfg.attention_dropout,
        activation_dropout=cfg.activation_dropout,
        scale_embedding=True,  # × √d_model (§3.4)
        max_position_embeddings=MAX_POSITIONS,
        pad_token_id=s.pad,
        eos_token_id=s.eos,
        decoder_start_token_id=s.bos,
        forced_eos_token_id=s.eos,
    )


def marian_weights(ours: dict[str, torch.Tensor], cfg: ModelConfig) -> dict[str, torch.Tensor]:
    """The ``MarianMTModel`` state dict of an aiayn ``Transformer`` state dict (the inverse of
    ``aiayn.interop.marian.aiayn_weights``).

    Raises:
        ExportError: the model has a parameter Marian has no counterpart for.
    """
    if unknown := unhandled(ours, marian_names.MARIAN_PARTS):
        raise ExportError(f"Marian has no counterpart for the model's {unknown[:3]}")
    p = permutation(cfg)

    def permuted(part: Part, tensor: torch.Tensor) -> torch.Tensor:
        """Every dimension of the residual stream reordered (a bias: its only one)."""
        for dim, size in enumerate(part.shape[: tensor.dim()]):
            if size == RESIDUAL:
                tensor = tensor.index_select(dim, p)
        return tensor

    def weight_and_bias(part: Part, prefix: str = "") -> tuple[torch.Tensor, torch.Tensor]:
        """A bias of zeros for a model without biases (the same function)."""
        weight_name, bias_name = part.names(prefix)
        weight = ours[weight_name]
        bias = ours.get(bias_name, torch.zeros(weight.size(0)))
        return permuted(part, weight), permuted(part, bias)

    out: dict[str, torch.Tensor] = {}
    for part, theirs in marian_names.MARIAN_MODEL.items():
        out[theirs] = weight_and_bias(part)[0]
    if cfg.share_embeddings:
        out[marian_names.MARIAN_SHARED] = out[marian_names.MARIAN_MODEL[SRC_EMBED]]
    out[marian_names.MARIAN_LOGITS_BIAS] = weight_and_bias(OUTPUT)[1].reshape(1, -1)
    for stack, n in (("encoder", cfg.n_encoder_layers), ("decoder", cfg.n_decoder_layers)):
        for i in range(n):
            theirs = marian_names.marian_layer_prefix(stack, i)
            for part in marian_names.marian_layer_parts(stack):
                weight, bias = weight_and_bias(part, layer_prefix(stack, i))
                modules = marian_names.marian_modules(part)
                rows = weight.size(0) // len(modules)  # the maps stacked in the one weight
                for j, module in enumerate(modules):
                    out[f"{theirs}{module}.weight"] = weight[j * rows : (j + 1) * rows]
                    out[f"{theirs}{module}.bias"] = bias[j * rows : (j + 1) * rows]
    return {k: v.detach().float().contiguous() for k, v in out.items()}


def _write_model(directory: Path, cfg: ModelConfig, state: dict[str, torch.Tensor]) -> None:
    """Build the Marian model, load the weights into it, check that every tensor arrived as
    written (ties included), and save it with its generation settings."""
    from transformers import GenerationConfig, MarianConfig, MarianMTModel

    config = MarianConfig(**marian_config(cfg))
    model = MarianMTModel(config)
    missing, unexpected = model.load_state_dict(state, strict=False)
    missing = [k for k in missing if "embed_positions" not in k]
    if missing or unexpected:
        raise ExportError(
            f"Marian weights do not match: missing {missing[:3]}, unexpected {unexpected[:3]}"
        )
    loaded = model.state_dict()
    for name, tensor in state.items():
        if not torch.equal(loaded[name], tensor):
            raise ExportError(f"{name}: Marian's model does not hold the weight written")
    model.generation_config = GenerationConfig(**generation_settings(cfg))
    model.save_pretrained(directory)


def write_hub_card(model_dir: Path, directory: Path, info: TokenizerInfo) -> None:
    """The model card (``README.md``) with the Hugging Face Hub's metadata in front (library,
    task, languages), unless the card has its own."""
    card = model_dir / MODEL_CARD
    text = card.read_text(encoding="utf-8") if card.is_file() else ""
    if not text.startswith("---\n"):
        languages = [code for code in (info.src_lang, info.tgt_lang) if code]
        front = ["---", "library_name: transformers", "pipeline_tag: translation"]
        front += ["language:", *(f"- {code}" for code in languages)] if languages else []
        front += ["tags:", "- marian", "- aiayn", "---", ""]
        text = "\n".join(front) + ("\n" + text if text else "")
    (directory / MODEL_CARD).write_text(text, encoding="utf-8")


def generation_settings(cfg: ModelConfig) -> dict:
    """What ``generate`` and the translation pipeline use: aiayn's special tokens, beam 5,
    the ids aiayn never emits (PAD, BOS) banned, and the closest to aiayn's repetition stop
    that a generation config holds (``aiayn.decode.guards.EXPORT_NO_REPEAT_NGRAM``; the
    length guard depends on each source's length, which a generation config cannot say)."""
    s = cfg.specials
    banned = [[s.pad]] + ([[s.bos]] if s.bos != s.pad else [])
    return dict(
        decoder_start_token_id=s.bos,
        eos_token_id=s.eos,
        pad_token_id=s.pad,
        forced_eos_token_id=s.eos,
        bad_words_ids=banned,
        num_beams=5,
        max_length=MAX_POSITIONS // 2,
        no_repeat_ngram_size=EXPORT_NO_REPEAT_NGRAM,
    )


def _write_tokenizer(directory: Path, model_dir: Path, info: TokenizerInfo, cfg: ModelConfig):
    """Marian's tokenizer files: ``source.spm``, ``target.spm``, ``vocab.json`` (and
    ``target_vocab.json`` with two vocabularies), written by transformers' MarianTokenizer."""
    from transformers import MarianTokenizer

    (directory / "source.spm").write_bytes((model_dir / info.src_file).read_bytes())
    (directory / "target.spm").write_bytes((model_dir / info.tgt_file).read_bytes())
    if info.kind == "marian":
        vocabs = [
            json.loads((model_dir / f).read_text(encoding="utf-8"))
            for f in (info.src_vocab_file, info.tgt_vocab_file)
        ]
        separate = info.src_vocab_file != info.tgt_vocab_file
    else:
        vocabs = [_piece_ids(model_dir / f) for f in (info.src_file, info.tgt_file)]
        separate = info.src_file != info.tgt_file
    (directory / "vocab.json").write_text(json.dumps(vocabs[0], ensure_ascii=False))
    if separate:
        (directory / "target_vocab.json").write_text(json.dumps(vocabs[1], ensure_ascii=False))
    tokenizer = MarianTokenizer(
        str(directory / "source.spm"),
        str(directory / "target.spm"),
        str(directory / "vocab.json"),
        target_vocab_file=str(directory / "target_vocab.json") if separate else None,
        separate_vocabs=separate,
        source_lang=info.src_lang or None,
        target_lang=info.tgt_lang or None,
        pad_token=tokenizer_piece(vocabs[1], cfg.specials.pad),
        eos_token=tokenizer_piece(vocabs[1], cfg.specials.eos),
        unk_token=tokenizer_piece(vocabs[0], cfg.specials.unk),
    )
    tokenizer.save_pretrained(directory)


def _piece_ids(model_file: Path) -> dict[str, int]:
    """piece -> id of a SentencePiece model (its ids are the model's)."""
    sp = spm.SentencePieceProcessor(model_file=str(model_file))
    return {sp.id_to_piece(i): i for i in range(sp.get_piece_size())}


def tokenizer_piece(vocab: dict[str, int], token_id: int) -> str:
    """The piece of ``token_id`` in a piece -> id vocabulary."""
    for piece, i in vocab.items():
        if i == token_id:
            return piece
    raise ExportError(f"the vocabulary has no piece for id {token_id}")
