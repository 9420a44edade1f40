"""Opening a prepared dataset directory: manifest, tokenizers and memory-mapped splits."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from aiayn.data.binarize import FORMAT, MANIFEST
from aiayn.data.corpus import CorpusError
from aiayn.data.indexed import IndexedDataset, sha256_file
from aiayn.data.tokenizer import SentencePieceTokenizer, Tokenizer


@dataclass(frozen=True)
class ParallelSplit:
    """Aligned source and target sentences of one split (ids without BOS/EOS)."""

    src: IndexedDataset
    tgt: IndexedDataset

    def __len__(self) -> int:
        return len(self.src)


@dataclass(frozen=True)
class ParallelData:
    directory: Path
    manifest: dict
    src_tokenizer: Tokenizer
    tgt_tokenizer: Tokenizer

    @property
    def split_names(self) -> list[str]:
        return list(self.manifest["splits"])

    def split(self, name: str) -> ParallelSplit:
        if name not in self.manifest["splits"]:
            raise CorpusError(f"{self.directory}: no split {name!r}; have {self.split_names}")
        dtype = self.manifest["dtype"]
        return ParallelSplit(
            IndexedDataset(self.directory / f"{name}.src", dtype),
            IndexedDataset(self.directory / f"{name}.tgt", dtype),
        )

    def verify(self) -> None:
        """Check every file against the manifest's SHA-256 sums."""
        for name, expected in self.manifest["sha256"].items():
            if sha256_file(self.directory / name) != expected:
                raise CorpusError(f"{self.directory / name}: checksum differs from {MANIFEST}")


def load_prepared(directory: str | Path) -> ParallelData:
    """Open a directory written by ``aiayn prepare``; nothing is read into memory."""
    directory = Path(directory)
    path = directory / MANIFEST
    if not path.is_file():
        raise CorpusError(f"{directory}: not a prepared dataset (no {MANIFEST}); run aiayn prepare")
    manifest = json.loads(path.read_text())
    if manifest.get("format") != FORMAT:
        raise CorpusError(f"{path}: not an aiayn parallel dataset manifest")
    files = manifest["vocab"]["files"]
    src_tok = SentencePieceTokenizer(directory / files["src"])
    tgt_tok = (
        src_tok
        if files["tgt"] == files["src"]
        else SentencePieceTokenizer(directory / files["tgt"])
    )
    return ParallelData(directory, manifest, src_tok, tgt_tok)
