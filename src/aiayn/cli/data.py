"""``aiayn data`` (fetch a named corpus) and ``aiayn prepare`` (vocabulary + binary dataset)."""

from __future__ import annotations

import argparse
import contextlib
import logging
import os
import sys
import time
from collections.abc import Iterator
from pathlib import Path

from aiayn.cli.common import UsageError, integer, log, number


def add_parsers(sub) -> None:
    data = sub.add_parser(
        "data",
        help="fetch a named dataset (Multi30k, WMT14 En-De), open test sets (FLORES-200 "
        "devtest, NTREX-128, Tatoeba) for English and other languages, or training corpora "
        "for any language pair (corpora: OPUS, WMT, ParaCrawl, ... through mtdata)",
    )
    data.add_argument(
        "name", choices=["multi30k", "wmt14", "flores200", "ntrex", "tatoeba", "corpora"]
    )
    data.add_argument("--dest", help="directory to put the files in")
    data.add_argument(
        "--from",
        dest="source",
        metavar="DIR",
        help="copy from this local directory (Multi30k files, WMT14 .tgz archives, test sets "
        "in the layout aiayn writes, e.g. ../shared/data/seedpairs) instead of downloading; "
        "default without --mirror: $AIAYN_DATA_DIR/NAME (test sets: $AIAYN_DATA_DIR/seedpairs) "
        "where it holds a copy, else download",
    )
    data.add_argument(
        "--langs",
        default="ko,pt",
        help="test sets: the languages paired with English, comma-separated two-letter codes "
        "(ko, pt, de, fr, es, it, ru, ja, zh; default ko,pt)",
    )
    data.add_argument(
        "--mirror",
        metavar="URL",
        help="test sets: download from this copy of the upstream repositories' files "
        "(https:// or file://) instead of GitHub; corpora: the Tatoeba Challenge's archives "
        "from this copy of https://object.pouta.csc.fi (its paths kept)",
    )
    _add_corpora_options(data)
    data.set_defaults(handler=run_data)
    _add_prepare_parser(sub)


def _add_corpora_options(data: argparse.ArgumentParser) -> None:
    """``aiayn data corpora``'s options: a pair's corpora in mtdata's index, listed or fetched."""
    data.add_argument(
        "--pair",
        metavar="SRC-TGT",
        help="corpora: the language pair, e.g. en-ko (ISO 639-1 or 639-3 codes); alone, lists "
        "the corpora mtdata's index holds for it, each with its licence where known",
    )
    data.add_argument(
        "--get",
        metavar="ID",
        nargs="+",
        default=[],
        help="corpora: fetch these dataset ids (from the list) into --dest as train.SRC.gz, "
        "train.TGT.gz, valid.SRC.gz, valid.TGT.gz and sources.tsv",
    )
    data.add_argument(
        "--valid",
        type=integer(minimum=0),
        default=1000,
        help="corpora: pairs held out at random for validation (default 1000; none of their "
        "sentences is trained on)",
    )
    data.add_argument("--seed", type=integer(minimum=0), default=1, help="corpora: the draw")
    data.add_argument(
        "--overwrite", action="store_true", help="corpora: replace a corpus fetched before"
    )


def _add_prepare_parser(sub) -> None:
    p = sub.add_parser(
        "prepare",
        help="train a vocabulary and binarise a corpus",
        description="Parallel corpus: --src-lang/--tgt-lang with --train/--valid[/--test] "
        "file prefixes (PREFIX.LANG or PREFIX.LANG.gz). Language-model corpus: --text FILE.",
    )
    p.add_argument("--out", required=True, help="dataset directory to write")
    p.add_argument(
        "--workers",
        type=integer(minimum=1),
        default=min(4, os.cpu_count() or 1),
        help="processes that encode the corpus (default: the CPU count, at most 4)",
    )
    p.add_argument(
        "--vocab-sample",
        type=integer(minimum=1),
        default=1_000_000,
        help="sentences sampled at random from the training text for the vocabulary",
    )
    p.add_argument(
        "--shard-size", type=integer(minimum=1), default=1_000_000, help="pairs per shard"
    )
    p.add_argument(
        "--overwrite", action="store_true", help="replace an existing dataset aiayn wrote at --out"
    )
    p.add_argument("--src-lang")
    p.add_argument("--tgt-lang")
    p.add_argument("--train", metavar="PREFIX")
    p.add_argument("--valid", metavar="PREFIX")
    p.add_argument("--test", metavar="PREFIX", nargs="*", default=[])
    p.add_argument("--vocab-size", type=integer(minimum=8), default=10000)
    p.add_argument(
        "--vocab-from",
        metavar="MODEL",
        default="",
        help="encode with the tokenizers of this model directory (to fine-tune it) instead of "
        "training a vocabulary",
    )
    p.add_argument("--subword-model", choices=["bpe", "unigram"], default="bpe")
    p.add_argument(
        "--separate-vocab",
        action="store_true",
        help="one vocabulary per language (default: joint, as the paper)",
    )
    p.add_argument(
        "--pretokenized",
        action="store_true",
        help="the text is already tokenised (e.g. Multi30k tok/)",
    )
    p.add_argument("--byte-fallback", action="store_true")
    p.add_argument(
        "--character-coverage",
        type=number(minimum=0.0, maximum=1.0),
        default=1.0,
        help="share of the text's characters given pieces of their own (default 1.0; "
        "0.9995 for Korean, Japanese or Chinese: their rarest characters become bytes with "
        "--byte-fallback, else <unk>)",
    )
    p.add_argument("--max-len", type=integer(minimum=1), default=256)
    p.add_argument(
        "--max-len-ratio",
        dest="pair_len_ratio",  # a filter of training pairs, not the decoding option
        type=number(minimum=1.0),
        default=9.0,
        help="drop training pairs whose longer side has more than this many times the "
        "tokens of the shorter (default: 9.0)",
    )
    p.add_argument("--empty-lines", choices=["drop", "error"], default="drop")
    p.add_argument(
        "--max-tokens",
        type=integer(minimum=1),
        default=4096,
        help="batch size used to report the padding fraction",
    )
    _add_language_model_options(p)
    p.set_defaults(handler=run_prepare)


def _add_language_model_options(p: argparse.ArgumentParser) -> None:
    """``aiayn prepare``'s options for a language-model corpus (one text file)."""
    p.add_argument(
        "--text", dest="lm_text", metavar="FILE", help="a language-model corpus (one text file)"
    )
    p.add_argument(
        "--tokenizer",
        choices=["char", "sentencepiece"],
        default="char",
        help="for --text: characters or SentencePiece",
    )
    p.add_argument(
        "--valid-fraction",
        type=number(minimum=0.0, maximum=1.0, below_max=True),
        default=0.1,
        help="for --text: the last fraction of characters for validation",
    )


def run_data(args: argparse.Namespace) -> int:
    from aiayn.data.corpus import CorpusError
    from aiayn.files import disk_refusals_in_one_line

    if args.name == "corpora":
        return _corpora(args)
    if args.pair or args.get:
        raise UsageError("--pair and --get are for `aiayn data corpora`")
    if not args.dest:
        raise UsageError(f"`aiayn data {args.name}` needs --dest DIR")
    if Path(args.dest).exists() and not Path(args.dest).is_dir():
        raise UsageError(f"--dest {args.dest}: exists and is not a directory")
    with disk_refusals_in_one_line(
        args.dest, error=CorpusError, kept="the files already complete there are kept"
    ):
        return _fetch(args)


def _fetch(args: argparse.Namespace) -> int:
    from aiayn.data.multi30k import fetch_multi30k
    from aiayn.data.testsets import REMOTES, fetch_testset
    from aiayn.data.wmt14 import fetch_wmt14

    if args.source and args.mirror:
        raise UsageError("give --from DIR or --mirror URL, not both")
    if not args.source and not args.mirror:
        args.source = local_copy(args.name)
        if args.source:
            log(f"copying {args.name} from {args.source} (a local copy: $AIAYN_DATA_DIR)")
    if args.name in REMOTES:
        langs = [lang.strip() for lang in args.langs.split(",") if lang.strip()]
        if not langs:
            raise UsageError("--langs names no language")
        files = fetch_testset(
            args.name, args.dest, langs=langs, source=args.source, mirror=args.mirror, log=log
        )
        print(f"{args.name}: {len(files)} files present and counted in {args.dest}")
        return 0
    fetch = {"multi30k": fetch_multi30k, "wmt14": fetch_wmt14}[args.name]
    dest = fetch(args.dest, source=args.source, log=log)
    print(f"{args.name}: all splits present and counted in {dest}")
    return 0


def _corpora(args: argparse.Namespace) -> int:
    """List the corpora of ``--pair`` or, with ``--get``, fetch some into ``--dest``."""
    if not args.pair:
        raise UsageError("`aiayn data corpora` needs --pair SRC-TGT, e.g. --pair en-ko")
    if args.get and not args.dest:
        raise UsageError("--get needs --dest DIR, the directory to write the corpus to")
    if args.source:
        raise UsageError(
            "--from is for the named datasets; corpora come through mtdata (its cache: "
            "$MTDATA, by default ~/.mtdata)"
        )
    from aiayn.data.language_pair import languages

    src, tgt = languages(args.pair)  # a bad code is refused before the index is read
    log("reading mtdata's index of corpora (built on first use, about a minute)")
    with quiet_mtdata():
        from aiayn.data import corpora

        server = args.mirror or corpora.CHALLENGE_SERVER
        index = corpora.load_index()
        if not args.get:
            found = corpora.list_corpora(index, src, tgt, server=server)
            return _list(found, src, tgt)
        entries = corpora.find(index, args.get, src, tgt, server=server)
        fetched = corpora.fetch_corpora(
            entries,
            args.dest,
            src=src,
            tgt=tgt,
            cache_dir=corpora.cache_dir(),
            valid=args.valid,
            seed=args.seed,
            overwrite=args.overwrite,
            log=log,
        )
    for name, pairs in fetched.pairs.items():
        log(f"{name}: {pairs:,} pairs")
    print(
        f"corpora: {fetched.train:,} training and {fetched.valid:,} validation pairs in "
        f"{args.dest} (train.{src}.gz, train.{tgt}.gz, valid.*; sources.tsv has the licences)"
    )
    return 0


def _list(found, src: str, tgt: str) -> int:
    """Print the training corpora of ``found``, id and licence; say what was left out."""
    corpora = [item for item in found if not item.evaluation]
    width = max(len(item.id) for item in corpora)
    for item in corpora:
        print(f"{item.id:<{width}}  {item.licence}")
    unknown = sum(item.licence == "unknown" for item in corpora)
    log(
        f"{len(corpora)} corpora for {src}-{tgt} (mtdata's index and the Tatoeba Challenge); "
        f"licence unknown for {unknown} (mtdata records none: read the corpus's own page, "
        f"e.g. https://opus.nlpl.eu/NAME); {len(found) - len(corpora)} development and test "
        "sets not listed (FLORES, NTREX, newstest, ...: `aiayn data flores200|ntrex|tatoeba` "
        f"fetches the ones aiayn scores on). Fetch: aiayn data corpora --pair {src}-{tgt} "
        "--get ID [ID ...] --dest DIR"
    )
    return 0


@contextlib.contextmanager
def quiet_mtdata() -> Iterator[None]:
    """mtdata configures the root logger when imported and logs its progress there (through
    ``logging.info``, which configures it again when it has no handler); for the command's
    duration the root logger drops everything (aiayn says what happens, and a failure is one
    line), and mtdata's progress bars show only on a terminal."""
    root = logging.getLogger()
    before, level = list(root.handlers), root.level
    import mtdata  # its first import adds a handler to the root logger, dropped here

    for handler in root.handlers:
        root.removeHandler(handler)
    quiet = logging.NullHandler()
    root.addHandler(quiet)
    root.setLevel(logging.CRITICAL + 1)
    mtdata.pbar_man.enabled = sys.stderr.isatty()
    try:
        yield
    finally:
        root.removeHandler(quiet)
        for handler in before:
            root.addHandler(handler)
        root.setLevel(level)


def local_copy(name: str) -> str | None:
    """The local copy of a named corpus or test set that ``aiayn data`` copies from when not
    told where: ``$AIAYN_DATA_DIR/NAME`` (``$AIAYN_DATA_DIR/seedpairs`` for the test sets) if
    it holds one, as ``aiayn pipeline`` looks for its corpus; None means download."""
    from aiayn.data.testsets import REMOTES
    from aiayn.pipeline.recipe_corpus import data_dir, default_corpus_dir

    if name not in REMOTES:
        found = default_corpus_dir(name)
        return str(found) if found else None
    root = data_dir() / "seedpairs"
    return str(root) if (root / name).is_dir() else None


def run_prepare(args: argparse.Namespace) -> int:
    from aiayn.memory import memory_mb

    start = time.perf_counter()
    if args.lm_text and args.vocab_from:
        raise UsageError("--vocab-from encodes a parallel corpus; a --text corpus trains its own")
    if args.lm_text:
        _prepare_lm(args)
    else:
        _prepare_parallel(args)
    _, peak_mb = memory_mb()
    print(
        f"prepared {args.out} in {time.perf_counter() - start:.1f}s, peak memory {peak_mb:.0f} MB"
    )
    return 0


def _prepare_parallel(args: argparse.Namespace) -> None:
    from aiayn.config import PrepareConfig
    from aiayn.data import TokenBatchSampler, load_prepared, prepare
    from aiayn.errors import ConfigError

    needed = ("src_lang", "tgt_lang", "train", "valid")
    missing = [f"--{n.replace('_', '-')}" for n in needed if not getattr(args, n)]
    if missing:
        raise UsageError(f"a parallel corpus needs {', '.join(missing)} (or --text FILE)")
    try:
        cfg = PrepareConfig(
            src_lang=args.src_lang,
            tgt_lang=args.tgt_lang,
            train=args.train,
            valid=args.valid,
            test=tuple(args.test),
            vocab_size=args.vocab_size,
            subword_model=args.subword_model,
            joint_vocab=not args.separate_vocab,
            pretokenized=args.pretokenized,
            byte_fallback=args.byte_fallback,
            character_coverage=args.character_coverage,
            max_len=args.max_len,
            max_len_ratio=args.pair_len_ratio,
            empty_lines=args.empty_lines,
            vocab_sample=args.vocab_sample,
            shard_size=args.shard_size,
            vocab_from=args.vocab_from,
        )
    except ValueError as e:
        raise ConfigError(str(e)) from None
    prepare(cfg, args.out, overwrite=args.overwrite, workers=args.workers, log=log)
    train = load_prepared(args.out).split("train")
    sampler = TokenBatchSampler(train.src.lengths, train.tgt.lengths, max_tokens=args.max_tokens)
    print(f"padding at max_tokens={args.max_tokens}: {sampler.padding_fraction():.1%}")


def _prepare_lm(args: argparse.Namespace) -> None:
    from aiayn.data.lm_stream import prepare_lm

    if args.valid_fraction <= 0:
        raise UsageError("--valid-fraction must be above 0 (the validation split needs text)")
    prepare_lm(
        args.lm_text,
        args.out,
        tokenizer=args.tokenizer,
        vocab_size=args.vocab_size,
        valid_fraction=args.valid_fraction,
        overwrite=args.overwrite,
        log=log,
    )
