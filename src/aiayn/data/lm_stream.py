"""Language-model corpora: one text file -> a contiguous token stream, cut into blocks.

``prepare_lm`` splits the text by characters (the first ``1 - valid_fraction`` for training,
the rest for validation, as nanoGPT does), tokenises each part (characters or SentencePiece)
and writes flat ``{split}.bin`` id streams with a manifest. ``TokenStream`` memory-maps them;
``aiayn.data.blocks`` cuts them into batches. Imports no torch (``aiayn prepare`` needs none).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import numpy as np

from aiayn.data.corpus import (
    MANIFEST,
    CorpusError,
    file_records,
    is_dataset,
    open_text,
    read_manifest,
    verify_checksums,
)
from aiayn.data.indexed import token_dtype
from aiayn.data.tokenizer import (
    CharTokenizer,
    Tokenizer,
    load_tokenizer,
    train_sentencepiece,
)
from aiayn.files import write_directory

FORMAT = "aiayn-lm-dataset"


def read_text(path: str | Path) -> str:
    """A whole UTF-8 text file (plain or .gz), with a clear error for bad bytes."""
    try:
        with open_text(path) as f:
            return f.read()
    except UnicodeDecodeError as e:
        raise CorpusError(f"{path}: invalid UTF-8 at byte {e.start} ({e.reason})") from None


def prepare_lm(
    text_file: str | Path,
    out_dir: str | Path,
    *,
    tokenizer: Literal["char", "sentencepiece"] = "char",
    vocab_size: int = 8000,
    valid_fraction: float = 0.1,
    overwrite: bool = False,
    log: Callable[[str], None] = lambda _: None,
) -> dict:
    """Write ``train.bin``, ``valid.bin``, the tokenizer and a manifest into ``out_dir``."""
    text = read_text(text_file)
    if not text.strip():
        raise CorpusError(f"{text_file}: empty corpus")
    if not 0.0 < valid_fraction < 1.0:
        raise ValueError(f"valid_fraction must be in (0, 1), got {valid_fraction}")
    cut = int(len(text) * (1.0 - valid_fraction))
    parts = {"train": text[:cut], "valid": text[cut:]}
    with write_directory(
        out_dir, replace=overwrite, replaceable=is_dataset(FORMAT), what="dataset"
    ) as tmp:
        tok, tok_file = _train_tokenizer(tokenizer, text, tmp, vocab_size)
        dtype = token_dtype(tok.vocab_size)
        tokens = {}
        for name, part in parts.items():
            ids = _encode_stream(tok, tokenizer, part)
            np.asarray(ids, dtype=dtype).tofile(tmp / f"{name}.bin")
            tokens[name] = len(ids)
            log(f"{name}: {len(part):,} characters -> {len(ids):,} tokens")
        manifest = {
            "format": FORMAT,
            "version": 1,
            "tokenizer": tok_file,
            "vocab_size": tok.vocab_size,
            "dtype": dtype.name,
            "tokens": tokens,
            "characters": {k: len(v) for k, v in parts.items()},
            "source": str(text_file),
            **file_records(tmp),
        }
        (tmp / MANIFEST).write_text(json.dumps(manifest, indent=2))
    return manifest


def _train_tokenizer(kind: str, text: str, tmp: Path, vocab_size: int) -> tuple[Tokenizer, str]:
    if kind == "char":
        tok = CharTokenizer.train(text)
        tok.save(tmp / "chars.json")
        return tok, "chars.json"
    lines = (line for line in text.splitlines() if line.strip())
    return train_sentencepiece(lines, tmp / "spm.model", vocab_size=vocab_size), "spm.model"


def _encode_stream(tok: Tokenizer, kind: str, text: str) -> list[int]:
    if kind == "char":
        return tok.encode([text])[0]
    # SentencePiece sees one line at a time; the line breaks become a newline-free stream.
    ids: list[int] = []
    for row in tok.encode(text.splitlines()):
        ids.extend(row)
    return ids


@dataclass(frozen=True)
class LMData:
    directory: Path
    manifest: dict
    tokenizer: Tokenizer

    def verify(self) -> None:
        """Check every file against the manifest's checksums (reads them all)."""
        verify_checksums(self.directory, self.manifest)

    def stream(self, split: str) -> np.ndarray:
        """The memory-mapped token ids of ``split`` (``train`` or ``valid``)."""
        if split not in self.manifest["tokens"]:
            raise CorpusError(f"{self.directory}: no split {split!r}")
        return np.memmap(self.directory / f"{split}.bin", dtype=self.manifest["dtype"], mode="r")


def load_lm_data(directory: str | Path) -> LMData:
    directory = Path(directory)
    manifest = read_manifest(directory, expected_format=FORMAT, description="LM dataset")
    return LMData(directory, manifest, load_tokenizer(directory / manifest["tokenizer"]))
