"""``aiayn prepare``: train the vocabulary, encode every split, write a manifest.

Everything is written into a temporary directory beside the destination and renamed into
place at the end, so an interrupted run never leaves a dataset that looks complete.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from itertools import islice
from pathlib import Path

from aiayn.config import PrepareConfig
from aiayn.config_io import config_to_dict
from aiayn.data.corpus import (
    MANIFEST,
    CorpusError,
    PairStats,
    is_dataset,
    read_lines,
    read_parallel,
)
from aiayn.data.indexed import IndexedWriter, token_dtype
from aiayn.data.tokenizer import Tokenizer, train_sentencepiece
from aiayn.files import atomic_directory, sha256_file

FORMAT = "aiayn-parallel-dataset"
CHUNK = 10_000  # sentences encoded at a time


@dataclass
class SplitStats:
    pairs: int = 0
    src_tokens: int = 0
    tgt_tokens: int = 0
    dropped_empty: int = 0
    dropped_too_long: int = 0
    dropped_ratio: int = 0
    files: dict[str, str] = field(default_factory=dict)  # role -> source path


def resolve_split_file(prefix: str, lang: str) -> Path:
    """``PREFIX.lang`` or ``PREFIX.lang.gz``, whichever exists."""
    for candidate in (Path(f"{prefix}.{lang}"), Path(f"{prefix}.{lang}.gz")):
        if candidate.is_file():
            return candidate
    raise CorpusError(f"{prefix}.{lang}: no such file (nor {prefix}.{lang}.gz)")


def split_name(prefix: str) -> str:
    """``data/tok/test_2016_flickr.lc.norm.tok`` -> ``test_2016_flickr``."""
    return Path(prefix).name.split(".")[0]


def prepare(
    cfg: PrepareConfig,
    out_dir: str | Path,
    *,
    overwrite: bool = False,
    log: Callable[[str], None] = lambda _: None,
) -> dict:
    """Build the dataset directory ``out_dir`` and return its manifest.

    Raises:
        CorpusError, TokenizerError: bad input, with a one-line reason.
        DestinationError: ``out_dir`` exists and is not a dataset to ``overwrite``.
    """
    splits = {"train": cfg.train, "valid": cfg.valid} | {split_name(p): p for p in cfg.test}
    files = {
        name: (resolve_split_file(p, cfg.src_lang), resolve_split_file(p, cfg.tgt_lang))
        for name, p in splits.items()
    }
    with atomic_directory(
        out_dir, replace=overwrite, replaceable=is_dataset(FORMAT), what="dataset"
    ) as tmp:
        start = time.perf_counter()
        src_tok, tgt_tok, vocab = _train_vocabularies(cfg, files["train"], tmp, log)
        log(f"vocabulary: {vocab['sizes']} in {time.perf_counter() - start:.1f}s")
        dtype = token_dtype(max(vocab["sizes"].values()))
        stats = {}
        for name, (src_file, tgt_file) in files.items():
            stats[name] = _encode_split(
                cfg, name, src_file, tgt_file, src_tok, tgt_tok, tmp, dtype, train=name == "train"
            )
            s = stats[name]
            log(
                f"{name}: {s.pairs:,} pairs, {s.src_tokens:,} + {s.tgt_tokens:,} tokens, dropped "
                f"{s.dropped_empty} empty, {s.dropped_too_long} too long, {s.dropped_ratio} ratio"
            )
        if stats["train"].pairs == 0:
            raise CorpusError(f"{files['train'][0]}: no training pairs left (empty corpus?)")
        manifest = _manifest(cfg, vocab, stats, dtype.name, tmp)
        (tmp / MANIFEST).write_text(json.dumps(manifest, indent=2))
    return manifest


def _train_vocabularies(cfg, train_files, tmp: Path, log) -> tuple[Tokenizer, Tokenizer, dict]:
    src_file, tgt_file = train_files
    options = dict(
        vocab_size=cfg.vocab_size,
        model_type=cfg.subword_model,
        byte_fallback=cfg.byte_fallback,
    )
    if cfg.joint_vocab:
        both = _interleave(read_lines(src_file), read_lines(tgt_file))
        if cfg.train_limit:
            both = islice(both, 2 * cfg.train_limit)
        log(f"training a joint {cfg.subword_model} vocabulary of {cfg.vocab_size:,}")
        tok = train_sentencepiece(_nonempty(both), tmp / "spm.model", **options)
        vocab = {
            "joint": True,
            "files": {"src": "spm.model", "tgt": "spm.model"},
            "sizes": {"src": tok.vocab_size, "tgt": tok.vocab_size},
        }
        return tok, tok, vocab
    log(f"training separate {cfg.subword_model} vocabularies of {cfg.vocab_size:,}")
    src_name, tgt_name = f"spm.{cfg.src_lang}.model", f"spm.{cfg.tgt_lang}.model"
    limit = cfg.train_limit or None
    src_lines, tgt_lines = islice(read_lines(src_file), limit), islice(read_lines(tgt_file), limit)
    src_tok = train_sentencepiece(_nonempty(src_lines), tmp / src_name, **options)
    tgt_tok = train_sentencepiece(_nonempty(tgt_lines), tmp / tgt_name, **options)
    vocab = {
        "joint": False,
        "files": {"src": src_name, "tgt": tgt_name},
        "sizes": {"src": src_tok.vocab_size, "tgt": tgt_tok.vocab_size},
    }
    return src_tok, tgt_tok, vocab


def _interleave(a: Iterable[str], b: Iterable[str]) -> Iterator[str]:
    for x, y in zip(a, b):  # noqa: B905 - counts are checked when the pairs are encoded
        yield x
        yield y


def _nonempty(lines: Iterable[str]) -> Iterator[str]:
    return (line for line in lines if line)


def _encode_split(cfg, name, src_file, tgt_file, src_tok, tgt_tok, tmp, dtype, *, train):
    stats = SplitStats(files={"src": str(src_file), "tgt": str(tgt_file)})
    pair_stats = PairStats()
    empty = cfg.empty_lines if train else "keep"
    pairs = read_parallel(src_file, tgt_file, stats=pair_stats, empty=empty)
    if train and cfg.train_limit:
        pairs = islice(pairs, cfg.train_limit)
    src_out = IndexedWriter(tmp / f"{name}.src", dtype)
    tgt_out = IndexedWriter(tmp / f"{name}.tgt", dtype)
    while chunk := list(islice(pairs, CHUNK)):
        src_ids = src_tok.encode([s for s, _ in chunk])
        tgt_ids = tgt_tok.encode([t for _, t in chunk])
        keep_src, keep_tgt = [], []
        for s, t in zip(src_ids, tgt_ids, strict=True):
            if train and max(len(s), len(t)) > cfg.max_len:
                stats.dropped_too_long += 1
            elif train and _ratio(len(s), len(t)) > cfg.max_len_ratio:
                stats.dropped_ratio += 1
            else:
                keep_src.append(s)
                keep_tgt.append(t)
        src_out.add(keep_src)
        tgt_out.add(keep_tgt)
        stats.src_tokens += sum(map(len, keep_src))
        stats.tgt_tokens += sum(map(len, keep_tgt))
    stats.pairs = src_out.close()
    tgt_out.close()
    stats.dropped_empty = pair_stats.empty_dropped
    return stats


def _ratio(a: int, b: int) -> float:
    return max(a, b) / max(min(a, b), 1)


def _manifest(cfg: PrepareConfig, vocab: dict, stats: dict, dtype: str, tmp: Path) -> dict:
    checksums = {p.name: sha256_file(p) for p in sorted(tmp.iterdir()) if p.is_file()}
    return {
        "format": FORMAT,
        "version": 1,
        "src_lang": cfg.src_lang,
        "tgt_lang": cfg.tgt_lang,
        "pretokenized": cfg.pretokenized,
        "dtype": dtype,
        "vocab": vocab,
        "splits": {name: vars(s) for name, s in stats.items()},
        "options": config_to_dict(cfg),
        "sha256": checksums,
    }
