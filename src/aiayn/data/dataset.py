"""Opening a prepared dataset directory: manifest, tokenizers and memory-mapped splits."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from aiayn.config import SpecialIds
from aiayn.data.binarize import FORMAT
from aiayn.data.corpus import CorpusError, read_manifest, verify_checksums
from aiayn.data.indexed import IndexedDataset, ShardedDataset, open_indexed
from aiayn.data.tokenizer import SentencePieceTokenizer, Tokenizer
from aiayn.data.tokenizer_files import load_tokenizers


@dataclass(frozen=True)
class ParallelSplit:
    """Aligned source and target sentences of one split (ids without BOS/EOS)."""

    src: IndexedDataset | ShardedDataset
    tgt: IndexedDataset | ShardedDataset

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

    @property
    def specials(self) -> SpecialIds:
        """The ids batches are framed with: aiayn's, or those of the model whose
        vocabularies encoded the corpus (``prepare --vocab-from``)."""
        return SpecialIds(**self.manifest["vocab"].get("specials", {}))

    @property
    def from_model(self) -> bool:
        """Encoded with a model's tokenizers (described by the dataset's ``tokenizer.json``)."""
        return "from_model" in self.manifest["vocab"]

    def split(self, name: str) -> ParallelSplit:
        if name not in self.manifest["splits"]:
            raise CorpusError(f"{self.directory}: no split {name!r}; have {self.split_names}")
        dtype = self.manifest["dtype"]
        shards = self.manifest["splits"][name].get("shards", [name])  # aiayn 0.1: one file
        return ParallelSplit(
            open_indexed([self.directory / f"{s}.src" for s in shards], dtype),
            open_indexed([self.directory / f"{s}.tgt" for s in shards], dtype),
        )

    def verify(self) -> None:
        """Check every file against the manifest's checksums (reads them all)."""
        verify_checksums(self.directory, self.manifest)


def load_prepared(directory: str | Path) -> ParallelData:
    """Open a directory written by ``aiayn prepare``; nothing is read into memory."""
    directory = Path(directory)
    manifest = read_manifest(directory, expected_format=FORMAT, description="parallel dataset")
    if "from_model" in manifest["vocab"]:
        src, tgt, _ = load_tokenizers(directory)
        return ParallelData(directory, manifest, src, tgt)
    files = manifest["vocab"]["files"]
    src_tok = SentencePieceTokenizer(directory / files["src"])
    tgt_tok = (
        src_tok
        if files["tgt"] == files["src"]
        else SentencePieceTokenizer(directory / files["tgt"])
    )
    return ParallelData(directory, manifest, src_tok, tgt_tok)
