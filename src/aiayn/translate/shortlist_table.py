"""A model directory's vocabulary shortlist table (``shortlist.safetensors``): built from the
training corpus by ``aiayn shortlist`` and the pipeline's stage of that name
(``aiayn.data.lexicon``'s lexical table over the pieces of the text as the model's
``tokenizer.json`` prepares it), read back and checked against the model's vocabularies and the
search asked for. The decoding over it is ``aiayn.accel.shortlist``."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import torch
from safetensors.numpy import load_file, save_file

from aiayn.accel.shortlist import Shortlist
from aiayn.data.corpus import read_lines
from aiayn.data.lexicon import lexical_table
from aiayn.data.tokenizer_files import load_tokenizers
from aiayn.files import check_writable
from aiayn.store import read_model_config
from aiayn.text.preprocessing import TextProcessor
from aiayn.translate.inputs import TranslationError

SHORTLIST_FILE = "shortlist.safetensors"
FREQUENT = 100  # the most frequent target pieces always allowed, unless told otherwise
LINES = 200_000  # sentence pairs a table is built from at most, unless told otherwise


class ShortlistError(TranslationError):
    """A shortlist asked for that the model directory cannot give."""


def check_shortlist(table: Shortlist | None, k: int, beam: int) -> None:
    """Refuse a shortlist of ``k`` pieces per source piece, searched with ``beam``, that
    ``table`` (None: the model has none) cannot give.

    Raises:
        ShortlistError: in one line, what is wrong.
    """
    if table is None:
        raise ShortlistError(
            f"shortlist {k}: the model directory has no shortlist table "
            "(build one with: aiayn shortlist MODEL --source FILE --target FILE)"
        )
    if k > table.per_source:
        raise ShortlistError(
            f"shortlist {k}: the model's table keeps at most {table.per_source} target "
            "pieces per source piece"
        )
    if beam > 1 and 2 * beam > len(table.frequent):
        raise ShortlistError(
            f"beam {beam} is too large for the shortlist's {len(table.frequent)} frequent "
            f"pieces (at most {len(table.frequent) // 2})"
        )


def build_shortlist(
    directory: str | Path,
    source: str | Path,
    target: str | Path,
    *,
    best: int = 100,
    frequent: int = FREQUENT,
    lines: int = LINES,
    raw: bool = False,
) -> Path:
    """Build the lexical table of the first ``lines`` sentence pairs of ``source`` and
    ``target`` (the training corpus) for the model in ``directory``: ``best`` target pieces
    per source piece, the ``frequent`` most frequent ones; write it there
    (``SHORTLIST_FILE``). The text is prepared as ``aiayn translate`` prepares natural
    text (the model's ``tokenizer.json``), or given to the subword model as it is (``raw``).

    Raises:
        ShortlistError: the two files have different numbers of lines (within ``lines``).
    """
    cfg = read_model_config(directory)
    check_writable(directory, what=SHORTLIST_FILE)
    src_tokenizer, tgt_tokenizer, info = load_tokenizers(directory)
    sides = []
    for path, tokenizer, steps, lang in (
        (source, src_tokenizer, info.src_preprocessing, info.src_lang),
        (target, tgt_tokenizer, info.tgt_preprocessing, info.tgt_lang),
    ):
        texts = [line for line, _ in zip(read_lines(path), range(lines), strict=False)]
        if not raw:
            processor = TextProcessor(steps, lang)
            texts = [processor.prepare(t) for t in texts]
        sides.append(tokenizer.encode(texts))
    if len(sides[0]) != len(sides[1]):
        raise ShortlistError(
            f"{source} and {target}: {len(sides[0])} and {len(sides[1])} lines; a parallel "
            "corpus has as many on both sides"
        )
    table = lexical_table(
        list(zip(*sides, strict=True)),
        src_vocab=cfg.src_vocab_size,
        tgt_vocab=cfg.tgt_vocab_size,
        best=best,
        frequent=frequent,
    )
    return write_shortlist(directory, table.best, table.frequent)


def write_shortlist(directory: str | Path, best: np.ndarray, frequent: np.ndarray) -> Path:
    """Write the table into a model directory (replacing one there, atomically)."""
    path = Path(directory) / SHORTLIST_FILE
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    save_file({"best": best.astype(np.int32), "frequent": frequent.astype(np.int32)}, str(tmp))
    os.replace(tmp, path)
    return path


def load_shortlist(directory: str | Path, src_vocab: int, tgt_vocab: int) -> Shortlist | None:
    """The model directory's table, None where it has none.

    Raises:
        ShortlistError: the file is unreadable or not of this model's vocabularies.
    """
    path = Path(directory) / SHORTLIST_FILE
    if not path.is_file():
        return None
    try:
        found = load_file(str(path))
        best, frequent = (torch.from_numpy(found[k]).long() for k in ("best", "frequent"))
    except Exception as e:  # a damaged or foreign file, whatever the library says
        raise ShortlistError(f"{path}: not a shortlist table ({e}); rebuild it") from None
    largest = int(torch.cat([best.flatten(), frequent, torch.tensor([-1])]).max())
    if best.dim() != 2 or best.size(0) != src_vocab or largest >= tgt_vocab:
        raise ShortlistError(
            f"{path}: built for other vocabularies than the model's ({src_vocab} source, "
            f"{tgt_vocab} target pieces); rebuild it with aiayn shortlist"
        )
    return Shortlist(best, frequent)
