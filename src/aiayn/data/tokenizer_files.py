"""``tokenizer.json``: which tokenizer files a model directory uses, with their vocabulary
sizes and checksums; one schema, one reader."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Literal

from aiayn.config import ModelConfig
from aiayn.data.marian_tokenizer import MarianTokenizer
from aiayn.data.tokenizer import CharTokenizer, Tokenizer, TokenizerError, load_tokenizer
from aiayn.files import sha256_file
from aiayn.text.preprocessing import MOSES_LOWERCASED, NO_PREPROCESSING, Preprocessing

TOKENIZER_FILE = "tokenizer.json"  # in a model directory: which tokenizer files it uses
TokenizerKind = Literal["sentencepiece", "char", "marian"]


@dataclass(frozen=True)
class TokenizerInfo:
    """``tokenizer.json`` of a model directory: the tokenizer files the model was trained
    with, their vocabulary sizes and SHA-256 sums (checked when loaded), and the languages.

    A language model has one tokenizer: ``src_file == tgt_file``. ``src_preprocessing`` and
    ``tgt_preprocessing`` record what each side's training text went through before it was
    cut into pieces (Moses steps, ``aiayn.text.Preprocessing``); a file without them (older
    aiayn) is read as Multi30k's ``tok/`` steps when ``pretokenized``, none otherwise.
    ``length_ratio``: target pieces per source piece on the training data (the decoding
    length guard's unit, ``aiayn.decode.guards``); None where unknown (older aiayn, an
    imported model).
    """

    kind: TokenizerKind
    src_file: str
    tgt_file: str
    src_vocab_size: int
    tgt_vocab_size: int
    sha256: dict[str, str]  # file name -> digest
    src_lang: str = ""
    tgt_lang: str = ""
    pretokenized: bool = False  # the training text was tokenised (BLEU on tokens)
    src_vocab_file: str = ""  # marian: the piece -> id vocabularies
    tgt_vocab_file: str = ""
    src_preprocessing: Preprocessing = NO_PREPROCESSING
    tgt_preprocessing: Preprocessing = NO_PREPROCESSING
    length_ratio: float | None = None

    @property
    def files(self) -> list[str]:
        names = {self.src_file, self.tgt_file, self.src_vocab_file, self.tgt_vocab_file}
        return sorted(names - {""})


def describe_tokenizers(
    directory: Path,
    src_file: str,
    tgt_file: str,
    *,
    src_lang: str = "",
    tgt_lang: str = "",
    pretokenized: bool = False,
    length_ratio: float | None = None,
) -> TokenizerInfo:
    """The ``TokenizerInfo`` of tokenizer files in ``directory``."""
    src, tgt = load_tokenizer(directory / src_file), load_tokenizer(directory / tgt_file)
    kinds = {type(t) for t in (src, tgt)}
    return TokenizerInfo(
        kind="char" if kinds == {CharTokenizer} else "sentencepiece",
        src_file=src_file,
        tgt_file=tgt_file,
        src_vocab_size=src.vocab_size,
        tgt_vocab_size=tgt.vocab_size,
        sha256={name: sha256_file(directory / name) for name in sorted({src_file, tgt_file})},
        src_lang=src_lang,
        tgt_lang=tgt_lang,
        pretokenized=pretokenized,
        src_preprocessing=preprocessing_of(pretokenized),
        tgt_preprocessing=preprocessing_of(pretokenized),
        length_ratio=length_ratio,
    )


def length_ratio_of(manifest: dict) -> float | None:
    """Target pieces per source piece in a prepared dataset's training split (None in a
    manifest without its token counts)."""
    train = manifest.get("splits", {}).get("train", {})
    src, tgt = train.get("src_tokens"), train.get("tgt_tokens")
    if not isinstance(src, int) or not isinstance(tgt, int) or src <= 0 or tgt <= 0:
        return None
    return round(tgt / src, 4)


def preprocessing_of(pretokenized: bool) -> Preprocessing:
    """The preprocessing of text aiayn calls pre-tokenised: Multi30k's ``tok/`` files
    (Moses punctuation normalisation, tokenisation, lowercasing), the only tokenised text
    its named corpora hold."""
    return MOSES_LOWERCASED if pretokenized else NO_PREPROCESSING


def tokenizer_info_json(info: TokenizerInfo) -> str:
    return json.dumps(asdict(info), indent=2) + "\n"


def read_tokenizer_info(directory: str | Path) -> TokenizerInfo:
    """The ``tokenizer.json`` of a model directory.

    Raises:
        TokenizerError: missing, not JSON, or without the fields of the schema.
    """
    path = Path(directory) / TOKENIZER_FILE
    if not path.is_file():
        raise TokenizerError(f"{path}: missing (the model directory has no tokenizer)")
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        if not isinstance(data, dict):
            raise TypeError("expected a JSON object")
        if "kind" not in data:
            return _upgraded(Path(directory), data)
        default = preprocessing_of(bool(data.get("pretokenized")))
        for side in ("src_preprocessing", "tgt_preprocessing"):
            data[side] = Preprocessing(**data[side]) if side in data else default
        return TokenizerInfo(**data)
    except (json.JSONDecodeError, UnicodeDecodeError, TypeError, KeyError) as e:
        raise TokenizerError(f"{path}: not a valid {TOKENIZER_FILE} ({e})") from None


def _upgraded(directory: Path, old: dict) -> TokenizerInfo:
    """The description written by aiayn 0.1 (without sizes and checksums, which are taken
    from the files as they are now)."""
    if old.get("task") == "lm":
        return describe_tokenizers(directory, old["file"], old["file"])
    return describe_tokenizers(
        directory,
        old["src"],
        old["tgt"],
        src_lang=old.get("src_lang", ""),
        tgt_lang=old.get("tgt_lang", ""),
        pretokenized=bool(old.get("pretokenized")),
    )


def load_tokenizers(directory: str | Path) -> tuple[Tokenizer, Tokenizer, TokenizerInfo]:
    """Source and target tokenizers of a model directory (one object when they share a
    file), checked against the sizes and checksums ``tokenizer.json`` recorded.

    Raises:
        TokenizerError: a file is missing or differs from the one the model was trained with.
    """
    directory = Path(directory)
    info = read_tokenizer_info(directory)
    for name in info.files:
        path = directory / name
        if not path.is_file():
            raise TokenizerError(f"{path}: missing (named in {TOKENIZER_FILE})")
        if sha256_file(path) != info.sha256.get(name):
            raise TokenizerError(
                f"{path}: differs from the tokenizer this model was trained with "
                f"(its checksum does not match {TOKENIZER_FILE})"
            )
    if info.kind == "marian":
        src = MarianTokenizer(directory / info.src_file, directory / info.src_vocab_file)
        tgt = MarianTokenizer(directory / info.tgt_file, directory / info.tgt_vocab_file)
        return src, tgt, info
    src = load_tokenizer(directory / info.src_file)
    tgt = src if info.tgt_file == info.src_file else load_tokenizer(directory / info.tgt_file)
    return src, tgt, info


def check_vocabularies(directory: str | Path, info: TokenizerInfo, model: ModelConfig) -> None:
    """Refuse tokenizers whose vocabulary sizes are not the model's.

    Raises:
        TokenizerError: naming both sizes.
    """
    pairs = [("target", info.tgt_vocab_size, model.tgt_vocab_size)]
    if model.is_encoder_decoder:
        pairs.insert(0, ("source", info.src_vocab_size, model.src_vocab_size))
    for side, tokenizer_size, model_size in pairs:
        if tokenizer_size != model_size:
            raise TokenizerError(
                f"{directory}: the {side} tokenizer has {tokenizer_size} pieces, the model's "
                f"vocabulary {model_size}"
            )
