"""Subword (SentencePiece) and character tokenizers sharing aiayn's fixed special ids."""

from __future__ import annotations

import io
import json
import re
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Literal, Protocol

import sentencepiece as spm

from aiayn.config import BOS_ID, EOS_ID, PAD_ID, SPECIAL_PIECES, UNK_ID
from aiayn.errors import AiaynError

SubwordModel = Literal["bpe", "unigram"]


class TokenizerError(AiaynError, ValueError):
    """A tokenizer that cannot be trained or loaded; the message says why in one line."""


class Tokenizer(Protocol):
    """What the rest of aiayn needs from a tokenizer."""

    @property
    def vocab_size(self) -> int: ...

    def encode(self, texts: Sequence[str]) -> list[list[int]]: ...

    def decode(self, ids: Sequence[int]) -> str: ...

    def pieces(self, ids: Sequence[int]) -> list[str]: ...

    def piece_id(self, piece: str) -> int | None: ...


class SentencePieceTokenizer:
    """A trained SentencePiece model (BPE or unigram) with ids PAD=0, UNK=1, BOS=2, EOS=3."""

    def __init__(self, model_file: str | Path):
        self.model_file = Path(model_file)
        try:
            self._sp = spm.SentencePieceProcessor(model_file=str(model_file))
        except (OSError, RuntimeError) as e:
            raise TokenizerError(f"{model_file}: not a SentencePiece model ({e})") from None
        specials = (self._sp.pad_id(), self._sp.unk_id(), self._sp.bos_id(), self._sp.eos_id())
        if specials != (PAD_ID, UNK_ID, BOS_ID, EOS_ID):
            raise TokenizerError(f"{model_file}: special ids {specials} are not aiayn's")

    @property
    def vocab_size(self) -> int:
        return self._sp.get_piece_size()

    def encode(self, texts: Sequence[str]) -> list[list[int]]:
        """Subword ids of each text, without BOS/EOS."""
        return self._sp.encode(list(texts))

    def decode(self, ids: Sequence[int]) -> str:
        """Text of ``ids``; PAD, BOS and EOS are dropped."""
        return self._sp.decode([int(i) for i in ids if i not in (PAD_ID, BOS_ID, EOS_ID)])

    def pieces(self, ids: Sequence[int]) -> list[str]:
        return [self._sp.id_to_piece(int(i)) for i in ids]

    def piece_id(self, piece: str) -> int | None:
        """The id of one whole piece, or None when the vocabulary lacks it."""
        i = self._sp.piece_to_id(piece)
        return None if i == UNK_ID and piece != SPECIAL_PIECES["unk"] else i


def train_sentencepiece(
    sentences: Iterable[str],
    model_file: str | Path,
    *,
    vocab_size: int,
    model_type: SubwordModel = "bpe",
    character_coverage: float = 1.0,
    max_sentences: int = 2_000_000,
    byte_fallback: bool = False,
    threads: int = 2,
) -> SentencePieceTokenizer:
    """Train a SentencePiece model on ``sentences`` and write it to ``model_file``.

    Normalisation is the identity, so decoding returns the text exactly as given (with
    whitespace runs collapsed). Subwords never cross spaces, which makes pre-tokenised text
    (Moses-tokenised Multi30k) decode back to the same tokens.

    Raises:
        TokenizerError: the vocabulary size is larger than the data supports, or the
            corpus is empty.
    """
    buffer = io.BytesIO()
    source = _Remembering(sentences)
    try:
        spm.SentencePieceTrainer.train(
            sentence_iterator=source,
            model_writer=buffer,
            vocab_size=vocab_size,
            model_type=model_type,
            character_coverage=character_coverage,
            normalization_rule_name="identity",
            split_by_whitespace=True,
            byte_fallback=byte_fallback,
            input_sentence_size=max_sentences,
            shuffle_input_sentence=True,
            num_threads=threads,
            pad_id=PAD_ID,
            unk_id=UNK_ID,
            bos_id=BOS_ID,
            eos_id=EOS_ID,
            pad_piece=SPECIAL_PIECES["pad"],
            unk_piece=SPECIAL_PIECES["unk"],
            bos_piece=SPECIAL_PIECES["bos"],
            eos_piece=SPECIAL_PIECES["eos"],
            minloglevel=2,
        )
    except RuntimeError as e:
        if source.error is not None:  # the corpus failed while SentencePiece read it
            raise source.error from None
        raise TokenizerError(_sentencepiece_reason(str(e), vocab_size)) from None
    Path(model_file).write_bytes(buffer.getvalue())
    return SentencePieceTokenizer(model_file)


class _Remembering:
    """An iterator that keeps the error its source raised: SentencePiece reports errors of
    a Python iterator as its own, with the cause buried in a traceback string."""

    def __init__(self, items: Iterable[str]):
        self._items = iter(items)
        self.error: AiaynError | None = None

    def __iter__(self) -> _Remembering:
        return self

    def __next__(self) -> str:
        try:
            return next(self._items)
        except AiaynError as e:
            self.error = e
            raise


def _sentencepiece_reason(message: str, vocab_size: int) -> str:
    too_high = re.search(r"set it to a value <= (\d+)", message)
    if too_high:
        return (
            f"vocabulary size {vocab_size} is larger than the data supports "
            f"(at most {too_high.group(1)})"
        )
    if "No valid sentence" in message or "empty" in message.lower():
        return "cannot train a vocabulary on an empty corpus"
    return f"SentencePiece training failed: {message.splitlines()[-1]}"


class CharTokenizer:
    """One id per character seen in training text, after the four special ids."""

    def __init__(self, chars: Sequence[str]):
        self.chars = list(chars)
        self._ids = {c: i + 4 for i, c in enumerate(self.chars)}

    @classmethod
    def train(cls, text: str) -> CharTokenizer:
        if not text:
            raise TokenizerError("cannot build a character vocabulary from empty text")
        return cls(sorted(set(text)))

    @classmethod
    def load(cls, path: str | Path) -> CharTokenizer:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
        return cls(data["chars"])

    def save(self, path: str | Path) -> None:
        payload = {"type": "char", "chars": self.chars}
        Path(path).write_text(json.dumps(payload, ensure_ascii=False), encoding="utf-8")

    @property
    def vocab_size(self) -> int:
        return len(self.chars) + 4

    def encode(self, texts: Sequence[str]) -> list[list[int]]:
        return [[self._ids.get(c, UNK_ID) for c in text] for text in texts]

    def decode(self, ids: Sequence[int]) -> str:
        return "".join(self.chars[i - 4] for i in map(int, ids) if i >= 4)

    def piece_id(self, piece: str) -> int | None:
        return self._ids.get(piece)

    def pieces(self, ids: Sequence[int]) -> list[str]:
        names = {PAD_ID: "<pad>", UNK_ID: "<unk>", BOS_ID: "<s>", EOS_ID: "</s>"}
        return [names.get(i, self.chars[i - 4] if i >= 4 else "?") for i in map(int, ids)]


def load_tokenizer(path: str | Path) -> Tokenizer:
    """Load a ``.model`` (SentencePiece) or ``.json`` (characters) tokenizer file."""
    path = Path(path)
    if not path.is_file():
        raise TokenizerError(f"{path}: no such tokenizer file")
    if path.suffix == ".json":
        return CharTokenizer.load(path)
    return SentencePieceTokenizer(path)
