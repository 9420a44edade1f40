"""The tokenizer of Marian (opus-mt) models: SentencePiece pieces mapped to ids by a vocabulary.

An opus-mt directory has ``source.spm`` and ``target.spm`` SentencePiece models and a
``vocab.json`` that gives each piece its model id (with separate vocabularies, the target's
is ``target_vocab.json``). Text is cut into pieces by the source model, and a leading
target-language token such as ``>>fra<<`` (multilingual models) is kept whole; pieces the
vocabulary lacks become ``<unk>``. Outputs are mapped back to pieces and joined by the target
model. This follows Hugging Face's ``MarianTokenizer`` (without its optional Moses
punctuation normalisation).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

import sentencepiece as spm

from aiayn.data.tokenizer import TokenizerError

SPECIAL = ("</s>", "<unk>", "<pad>")


class MarianTokenizer:
    """One side of a Marian model: a SentencePiece model and its piece -> id vocabulary."""

    def __init__(self, spm_file: str | Path, vocab_file: str | Path):
        try:
            self._sp = spm.SentencePieceProcessor(model_file=str(spm_file))
        except (OSError, RuntimeError) as e:
            raise TokenizerError(f"{spm_file}: not a SentencePiece model ({e})") from None
        try:
            vocab = json.loads(Path(vocab_file).read_text(encoding="utf-8"))
        except (OSError, ValueError) as e:
            raise TokenizerError(f"{vocab_file}: not a JSON vocabulary ({e})") from None
        if not isinstance(vocab, dict) or "<unk>" not in vocab:
            raise TokenizerError(
                f"{vocab_file}: a Marian vocabulary maps pieces to ids, with <unk>"
            )
        self.ids: dict[str, int] = _checked_ids(vocab, vocab_file)
        self._pieces = {i: p for p, i in self.ids.items()}
        self.unk_id = self.ids["<unk>"]
        self._special_ids = {self.ids[p] for p in SPECIAL if p in self.ids}

    @property
    def vocab_size(self) -> int:
        return max(self.ids.values()) + 1

    def piece_id(self, piece: str) -> int | None:
        """The id of ``piece`` (e.g. a target-language token ``>>fra<<``), or None."""
        return self.ids.get(piece)

    def encode(self, texts: Sequence[str]) -> list[list[int]]:
        """Ids of each text, without EOS; a leading ``>>xx<<`` stays one token."""
        return [[self.ids.get(p, self.unk_id) for p in self._pieces_of(t)] for t in texts]

    def decode(self, ids: Sequence[int]) -> str:
        """Text of ``ids``; special tokens (EOS, PAD, UNK) are dropped. As Hugging Face's
        ``convert_tokens_to_string``: a word marker ``▁`` left by a piece the target model
        lacks (one only the shared vocabulary's source side has) becomes a space."""
        pieces = [self._pieces.get(int(i), "") for i in ids if int(i) not in self._special_ids]
        return self._sp.decode_pieces([p for p in pieces if p]).replace("\u2581", " ").strip()

    def pieces(self, ids: Sequence[int]) -> list[str]:
        return [self._pieces.get(int(i), "<unk>") for i in ids]

    def _pieces_of(self, text: str) -> list[str]:
        code = []
        if text.startswith(">>") and (end := text.find("<<")) != -1:
            code, text = [text[: end + 2]], text[end + 2 :]
        return code + self._sp.encode(text, out_type=str)


MAX_ID = 10_000_000  # no vocabulary is this large; a larger id is a damaged file


def _checked_ids(vocab: dict, vocab_file: str | Path) -> dict[str, int]:
    """The vocabulary's piece -> id map, each id a whole number from 0, no id given twice.

    Raises:
        TokenizerError: naming the file, the piece and its id.
    """
    ids: dict[str, int] = {}
    owner: dict[int, str] = {}
    for piece, value in vocab.items():
        if isinstance(value, bool) or not isinstance(value, int):
            raise TokenizerError(f"{vocab_file}: piece {piece!r} has id {value!r}, not a number")
        if not 0 <= value < MAX_ID:
            raise TokenizerError(
                f"{vocab_file}: piece {piece!r} has id {value}, outside 0..{MAX_ID - 1}"
            )
        if value in owner:
            raise TokenizerError(
                f"{vocab_file}: pieces {owner[value]!r} and {piece!r} both have id {value}"
            )
        owner[value] = piece
        ids[str(piece)] = value
    return ids
