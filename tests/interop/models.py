"""Small random aiayn model directories for the export tests: any architecture, tokenizers of
each kind, random LayerNorms and biases (so that an export that dropped or misplaced one
would change the outputs)."""

from __future__ import annotations

from pathlib import Path

import torch

from aiayn.config import ModelConfig
from aiayn.data import train_sentencepiece
from aiayn.data.tokenizer import CharTokenizer
from aiayn.data.tokenizer_files import TOKENIZER_FILE, describe_tokenizers, tokenizer_info_json
from aiayn.models import build_model
from aiayn.store import save_model

from ..data.corpora import invented_words, sentences

# aiayn's searches without their guards: what a parity test compares with another library's
UNGUARDED = {"max_len_ratio": 0.0, "repeat_stop": 0, "all_caps": "off"}
SRC_TEXT = sentences(300, seed=1, words=invented_words(80, seed=1))
TGT_TEXT = sentences(300, seed=2, words=invented_words(80, seed=2))


def model_dir(
    root: Path,
    *,
    tokenizer: str = "joint",
    languages: tuple[str, str] = ("en", "de"),
    seed: int = 0,
    **model,
) -> Path:
    """A random model directory at ``root / "model"``; ``tokenizer`` is ``joint`` (one
    SentencePiece model), ``separate`` (one per side) or ``char``."""
    root.mkdir(parents=True, exist_ok=True)
    if tokenizer == "char":
        CharTokenizer.train("".join(SRC_TEXT + TGT_TEXT)).save(root / "chars.json")
        src = tgt = "chars.json"
    elif tokenizer == "separate":
        train_sentencepiece(SRC_TEXT, root / "src.model", vocab_size=90)
        train_sentencepiece(TGT_TEXT, root / "tgt.model", vocab_size=80)
        src, tgt = "src.model", "tgt.model"
    else:
        train_sentencepiece(SRC_TEXT + TGT_TEXT, root / "spm.model", vocab_size=90)
        src = tgt = "spm.model"
    info = describe_tokenizers(root, src, tgt, src_lang=languages[0], tgt_lang=languages[1])
    fields = dict(d_model=16, n_heads=2, d_ff=24, n_encoder_layers=2, n_decoder_layers=2)
    fields["share_embeddings"] = tokenizer != "separate"
    cfg = ModelConfig(**{**fields, **model}).with_vocab(info.src_vocab_size, info.tgt_vocab_size)
    torch.manual_seed(seed)
    model = build_model(cfg, profile="reference")
    with torch.no_grad():
        for name, parameter in model.named_parameters():
            if "norm" in name:
                parameter.uniform_(0.5, 1.5) if name.endswith("weight") else parameter.normal_(
                    0, 0.2
                )
            elif name.endswith("bias"):
                parameter.normal_(0, 0.1)
    assets = {name: (root / name).read_bytes() for name in info.files}
    assets[TOKENIZER_FILE] = tokenizer_info_json(info).encode()
    return save_model(model, cfg, root / "model", assets=assets)
