"""``aiayn prepare``: train the vocabulary, encode every split, write a manifest.

Everything is written into a temporary directory beside the destination and renamed into
place at the end, so an interrupted run never leaves a dataset that looks complete.
"""

from __future__ import annotations

import json
import shutil
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import asdict, replace
from itertools import islice, zip_longest
from pathlib import Path

from aiayn.config import PrepareConfig
from aiayn.config_io import config_to_dict, model_config_of
from aiayn.data.corpus import (
    MANIFEST,
    CorpusError,
    PairStats,
    count_lines,
    file_records,
    is_dataset,
    read_lines,
    read_parallel,
)
from aiayn.data.encode import ChunkEncoder, Filter, ShardWriter, SplitStats
from aiayn.data.indexed import token_dtype
from aiayn.data.tokenizer import train_sentencepiece
from aiayn.data.tokenizer_files import TOKENIZER_FILE, load_tokenizers, tokenizer_info_json
from aiayn.files import sha256_file, write_directory

FORMAT = "aiayn-parallel-dataset"


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
    workers: int = 1,
    log: Callable[[str], None] = lambda _: None,
) -> dict:
    """Build the dataset directory ``out_dir`` and return its manifest.

    The vocabulary is trained on a random sample of at most ``cfg.vocab_sample`` sentences;
    every split is encoded by ``workers`` processes into shards of ``cfg.shard_size`` pairs.
    Memory stays bounded whatever the size of the corpus, and the result does not depend on
    ``workers``.

    Raises:
        CorpusError, TokenizerError: bad input, with a one-line reason.
        DestinationError: ``out_dir`` exists and is not a dataset to ``overwrite``.
    """
    splits = {"train": cfg.train, "valid": cfg.valid} | {split_name(p): p for p in cfg.test}
    files = {
        name: (resolve_split_file(p, cfg.src_lang), resolve_split_file(p, cfg.tgt_lang))
        for name, p in splits.items()
    }
    with write_directory(
        out_dir, replace=overwrite, replaceable=is_dataset(FORMAT), what="dataset"
    ) as tmp:
        start = time.perf_counter()
        if cfg.vocab_from:
            vocab = _copy_vocabularies(cfg, tmp, log)
            models = (tmp, tmp)  # the tokenizers tmp/tokenizer.json describes
        else:
            vocab = _train_vocabularies(cfg, files["train"], tmp, log, threads=workers)
            models = (tmp / vocab["files"]["src"], tmp / vocab["files"]["tgt"])
        log(f"vocabulary: {vocab['sizes']} in {time.perf_counter() - start:.1f}s")
        dtype = token_dtype(max(vocab["sizes"].values()))
        stats = {}
        with ChunkEncoder(*models, workers=workers) as encoder:
            for name, (src_file, tgt_file) in files.items():
                start = time.perf_counter()
                stats[name] = _encode_split(cfg, name, src_file, tgt_file, encoder, tmp, dtype)
                s = stats[name]
                log(
                    f"{name}: {s.pairs:,} pairs in {time.perf_counter() - start:.1f}s, "
                    f"{s.src_tokens:,} + {s.tgt_tokens:,} tokens, dropped {s.dropped_empty} empty, "
                    f"{s.dropped_too_long} too long, {s.dropped_ratio} ratio"
                )
        if stats["train"].pairs == 0:
            raise CorpusError(f"{files['train'][0]}: no training pairs left (empty corpus?)")
        for name, s in stats.items():
            if name != "train" and s.pairs == 0:
                raise CorpusError(
                    f"{files[name][0]}: the {name} split is empty; validation and test "
                    "sets need at least one pair"
                )
        if not cfg.vocab_from and (warning := vocabulary_warning(vocab, stats["train"])):
            log(warning)
        manifest = _manifest(cfg, vocab, stats, dtype.name, tmp)
        (tmp / MANIFEST).write_text(json.dumps(manifest, indent=2))
    return manifest


TOKENS_PER_PIECE = 20  # fewer training tokens per piece: a vocabulary too large to learn


def vocabulary_warning(vocab: dict, train) -> str | None:
    """A warning when the training text has fewer than ``TOKENS_PER_PIECE`` tokens per
    vocabulary piece on a side (as a 10,000-piece vocabulary on 5,000 short sentence pairs
    does): most pieces are then seen too rarely to be learned."""
    for side, tokens in (("source", train.src_tokens), ("target", train.tgt_tokens)):
        pieces = vocab["sizes"]["src" if side == "source" else "tgt"]
        if tokens < TOKENS_PER_PIECE * pieces:
            return (
                f"warning: the {side} side of the training text has {tokens:,} tokens for "
                f"{pieces:,} vocabulary pieces ({tokens / pieces:.1f} per piece, fewer than "
                f"{TOKENS_PER_PIECE}): most pieces are too rare to be learned; a smaller "
                "vocab_size suits this corpus"
            )
    return None


def _train_vocabularies(cfg, train_files, tmp: Path, log, *, threads: int) -> dict:
    """Train the SentencePiece model(s) on a random sample of the training text (at most
    ``cfg.vocab_sample`` sentences, drawn by SentencePiece as it reads); their description."""
    src_file, tgt_file = train_files
    options = dict(
        vocab_size=cfg.vocab_size,
        model_type=cfg.subword_model,
        byte_fallback=cfg.byte_fallback,
        character_coverage=cfg.character_coverage,
        max_sentences=cfg.vocab_sample,
        threads=threads,
    )
    if cfg.joint_vocab:
        both = _interleave(src_file, tgt_file)
        if cfg.train_limit:
            both = islice(both, 2 * cfg.train_limit)
        log(f"training a joint {cfg.subword_model} vocabulary of {cfg.vocab_size:,}")
        tok = train_sentencepiece(_nonempty(both), tmp / "spm.model", **options)
        files = {"src": "spm.model", "tgt": "spm.model"}
        return {
            "joint": True,
            "files": files,
            "sizes": {"src": tok.vocab_size, "tgt": tok.vocab_size},
        }
    log(f"training separate {cfg.subword_model} vocabularies of {cfg.vocab_size:,}")
    src_name, tgt_name = f"spm.{cfg.src_lang}.model", f"spm.{cfg.tgt_lang}.model"
    limit = cfg.train_limit or None
    src_lines, tgt_lines = islice(read_lines(src_file), limit), islice(read_lines(tgt_file), limit)
    src_tok = train_sentencepiece(_nonempty(src_lines), tmp / src_name, **options)
    tgt_tok = train_sentencepiece(_nonempty(tgt_lines), tmp / tgt_name, **options)
    return {
        "joint": False,
        "files": {"src": src_name, "tgt": tgt_name},
        "sizes": {"src": src_tok.vocab_size, "tgt": tgt_tok.vocab_size},
    }


def _copy_vocabularies(cfg: PrepareConfig, tmp: Path, log) -> dict:
    """Copy the tokenizers of the model directory ``cfg.vocab_from`` (checked against its
    ``tokenizer.json``) and describe them, with the model's special ids, for the manifest."""
    source = Path(cfg.vocab_from)
    model = model_config_of(source, where="--vocab-from")
    if not model.is_encoder_decoder:
        raise CorpusError(
            f"--vocab-from {source}: a language model; a parallel corpus takes a translation "
            "model's vocabularies"
        )
    specials = model.specials
    _, _, info = load_tokenizers(source)
    theirs, ours = (info.src_lang, info.tgt_lang), (cfg.src_lang, cfg.tgt_lang)
    if all(theirs) and theirs != ours:
        raise CorpusError(
            f"--vocab-from {source}: a {theirs[0]}-{theirs[1]} model, and this corpus is "
            f"{ours[0]}-{ours[1]}; its vocabularies were not made for these languages"
        )
    log(f"encoding with the {info.kind} vocabularies of {source}")
    for name in info.files:
        shutil.copyfile(source / name, tmp / name)
    info = replace(
        info, src_lang=cfg.src_lang, tgt_lang=cfg.tgt_lang, pretokenized=cfg.pretokenized
    )
    (tmp / TOKENIZER_FILE).write_text(tokenizer_info_json(info))
    return {
        "joint": info.src_file == info.tgt_file,
        "files": {"src": info.src_file, "tgt": info.tgt_file},
        "sizes": {"src": info.src_vocab_size, "tgt": info.tgt_vocab_size},
        "specials": asdict(specials),
        "from_model": {"path": str(source), "sha256": dict(info.sha256)},
    }


def _interleave(src_file: Path, tgt_file: Path) -> Iterator[str]:
    """Source and target lines alternately; files of different lengths are an error."""
    for x, y in zip_longest(read_lines(src_file), read_lines(tgt_file)):
        if x is None or y is None:
            raise CorpusError(
                f"line counts differ: {src_file} has {count_lines(src_file)} lines, "
                f"{tgt_file} has {count_lines(tgt_file)}"
            )
        yield x
        yield y


def _nonempty(lines: Iterable[str]) -> Iterator[str]:
    return (line for line in lines if line)


def _encode_split(cfg, name, src_file, tgt_file, encoder, tmp, dtype) -> SplitStats:
    train = name == "train"
    stats = SplitStats(
        files={"src": str(src_file), "tgt": str(tgt_file)},
        text_sha256={"src": sha256_file(src_file), "tgt": sha256_file(tgt_file)},
    )
    pair_stats = PairStats()
    pairs = read_parallel(
        src_file, tgt_file, stats=pair_stats, empty=cfg.empty_lines if train else "keep"
    )
    if train and cfg.train_limit:
        pairs = islice(pairs, cfg.train_limit)
    keep = Filter(cfg.max_len, cfg.max_len_ratio, active=train)
    writer = ShardWriter(tmp, name, dtype, shard_size=cfg.shard_size)
    for chunk in encoder.encode(pairs, keep):
        writer.add(chunk)
        stats.add(chunk)
    stats.shards = writer.close()
    stats.dropped_empty = pair_stats.empty_dropped
    return stats


def _manifest(cfg: PrepareConfig, vocab: dict, stats: dict, dtype: str, tmp: Path) -> dict:
    return {
        "format": FORMAT,
        "version": 2,  # 2: splits in shards
        "src_lang": cfg.src_lang,
        "tgt_lang": cfg.tgt_lang,
        "pretokenized": cfg.pretokenized,
        "dtype": dtype,
        "vocab": vocab,
        "splits": {name: vars(s) for name, s in stats.items()},
        "options": config_to_dict(cfg),
        **file_records(tmp),
    }
