"""The ``aiayn`` command line: the only module that reads argv, prints, or configures logging."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence
from pathlib import Path

from aiayn.config import MODEL_PRESETS


class UserError(Exception):
    """A mistake the user can fix: printed as one line, exit status 2."""


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    handler: Callable[[argparse.Namespace], int] = args.handler
    try:
        return handler(args)
    except UserError as e:
        print(f"aiayn {args.command}: error: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"aiayn {args.command}: interrupted", file=sys.stderr)
        return 130


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="aiayn", description="The Transformer of 'Attention Is All You Need'."
    )
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    info = sub.add_parser("info", help="print a model's size, component by component")
    info.add_argument("--preset", choices=sorted(MODEL_PRESETS), default="base")
    info.add_argument(
        "--vocab-size",
        type=int,
        default=37000,
        help="shared vocabulary size (default: 37000, the paper's WMT En-De BPE)",
    )
    info.add_argument("--model", help="a model directory instead of a preset")
    info.set_defaults(handler=cmd_info)
    _add_data_parser(sub)
    _add_prepare_parser(sub)
    _add_train_parsers(sub)
    _add_translate_parsers(sub)
    _add_pipeline_parser(sub)
    _add_plot_parser(sub)
    _add_generate_parser(sub)
    return parser


def _add_generate_parser(sub) -> None:
    g = sub.add_parser("generate", help="sample text from a language model")
    g.add_argument("--model", required=True, help="language-model directory")
    g.add_argument("--prompt", default="\n", help="text to continue (default: a newline)")
    g.add_argument("--max-new-tokens", type=int, default=500)
    g.add_argument("--temperature", type=float, default=0.8, help="0: greedy")
    g.add_argument("--top-k", type=int, default=0, help="sample among the k likeliest (0: all)")
    g.add_argument("--top-p", type=float, default=1.0, help="nucleus sampling mass (1: off)")
    g.add_argument("--seed", type=int, help="make the sample reproducible")
    g.add_argument("--stop-at-eos", action="store_true", help="stop when the model emits EOS")
    g.add_argument(
        "--no-cache",
        action="store_true",
        help="re-run the whole context for each token (slow; for comparison)",
    )
    g.set_defaults(handler=cmd_generate)


def _add_plot_parser(sub) -> None:
    plot = sub.add_parser("plot", help="draw attention, positional encodings or training curves")
    kinds = plot.add_subparsers(dest="plot", required=True, metavar="WHAT")
    att = kinds.add_parser("attention", help="attention heatmaps for one sentence")
    att.add_argument("--model", required=True, help="model directory")
    att.add_argument("--src", required=True, help="source sentence")
    att.add_argument("--tgt", help="target sentence to force-decode (default: translate --src)")
    att.add_argument(
        "--kind",
        choices=["encoder", "decoder", "cross", "all"],
        default="all",
        help="which attention (all: one file each, suffixed _encoder ...)",
    )
    att.add_argument("--layers", help="comma-separated 1-based layers (default: all)")
    att.add_argument("--heads", help="comma-separated 1-based heads (default: all)")
    att.add_argument("--beam", type=int, default=5, help="beam size when translating --src")
    att.add_argument("-o", "--output", required=True, help="FILE.png or FILE.svg")
    att.set_defaults(handler=cmd_plot_attention)
    pos = kinds.add_parser("positional", help="the sinusoidal positional encoding (§3.5)")
    pos.add_argument("--d-model", type=int, default=128)
    pos.add_argument("--length", type=int, default=100)
    pos.add_argument("--concat", action="store_true", help="the [sin | cos] layout")
    pos.add_argument("-o", "--output", required=True)
    pos.set_defaults(handler=cmd_plot_positional)
    cur = kinds.add_parser("curves", help="loss, learning rate and BLEU of a training run")
    cur.add_argument("run_dir")
    cur.add_argument("-o", "--output", required=True)
    cur.set_defaults(handler=cmd_plot_curves)


def _add_pipeline_parser(sub) -> None:
    p = sub.add_parser(
        "pipeline",
        help="corpus -> prepare -> train -> average -> translate -> score, from one recipe",
    )
    p.add_argument("recipe", help="TOML recipe, e.g. configs/multi30k_en_de_tiny.toml")
    p.add_argument("--work", help="work directory (default: runs/<recipe name>)")
    p.add_argument(
        "--corpus",
        metavar="DIR",
        help="a local Multi30k copy (default: $AIAYN_DATA_DIR/multi30k or "
        "../shared/data/multi30k if present, else download)",
    )
    p.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="override a recipe field, e.g. --set run.max_minutes=30",
    )
    p.set_defaults(handler=cmd_pipeline)


def _add_translate_parsers(sub) -> None:
    t = sub.add_parser("translate", help="translate text with a trained model")
    t.add_argument("--model", required=True, help="model directory (e.g. RUN/average or RUN/best)")
    t.add_argument("--input", "-i", help="input file, one sentence a line (default: stdin)")
    t.add_argument("--output", "-o", help="output file (default: stdout)")
    t.add_argument("--beam", type=int, default=5, help="beam size; 1 is greedy (default 5)")
    t.add_argument("--alpha", type=float, default=0.6, help="length penalty α (0: none)")
    t.add_argument(
        "--nbest",
        type=int,
        default=1,
        help="hypotheses per line; above 1, lines are 'N ||| text ||| score'",
    )
    t.add_argument(
        "--max-len-b",
        type=int,
        default=50,
        help="outputs have at most source length + this many tokens (§6.1)",
    )
    t.add_argument("--batch-tokens", type=int, default=4096, help="padded source tokens per batch")
    t.add_argument(
        "--precision",
        choices=["fp32", "bf16"],
        default="fp32",
        help="bf16: matrix products in bfloat16 (faster on CPUs with AVX512-BF16 or AMX)",
    )
    t.add_argument(
        "--max-src-len",
        type=int,
        default=1024,
        help="inputs longer than this many subwords are truncated (or refused)",
    )
    t.add_argument("--on-long", choices=["truncate", "error"], default="truncate")
    t.add_argument("--ref", help="reference file: print BLEU and chrF after translating")
    t.add_argument(
        "--tokenized",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="score with tokenize='none' (default: when the model's data was pre-tokenised)",
    )
    t.add_argument("--device", default="cpu")
    t.add_argument("--threads", type=int, default=0)
    t.set_defaults(handler=cmd_translate)
    e = sub.add_parser(
        "evaluate",
        help="score translations (BLEU, chrF), or a language model's perplexity on a text",
        description="Translations: --hyp FILE --ref FILE. Language model: --model DIR --text FILE.",
    )
    e.add_argument("--hyp", help="hypotheses, one a line")
    e.add_argument("--ref", help="references, one a line")
    e.add_argument("--model", help="a language-model directory")
    e.add_argument("--text", help="with --model: the text to measure perplexity on")
    e.add_argument(
        "--block-size",
        type=int,
        default=256,
        help="with --model: tokens of context per block (capped by the model)",
    )
    e.add_argument(
        "--tokenized",
        action="store_true",
        help="text is tokenised and lowercased: sacreBLEU tokenize='none'",
    )
    e.set_defaults(handler=cmd_evaluate)


def _add_train_parsers(sub) -> None:
    train = sub.add_parser("train", help="train a model from a TOML config")
    train.add_argument("config", help="TOML file: [model], [data], [optim], [run] tables")
    train.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="override a config field, e.g. --set optim.lr=0.001 (repeatable)",
    )
    train.add_argument(
        "--resume", action="store_true", help="continue from the run directory's latest checkpoint"
    )
    train.set_defaults(handler=cmd_train)
    average = sub.add_parser("average", help="average checkpoints into one model (§6.1)")
    average.add_argument("paths", nargs="+", help="a run directory, or checkpoint directories")
    average.add_argument(
        "--last", type=int, default=5, help="with a run directory: how many of its last checkpoints"
    )
    average.add_argument("--out", required=True, help="model directory to write")
    average.set_defaults(handler=cmd_average)


def _add_data_parser(sub) -> None:
    data = sub.add_parser("data", help="fetch a named dataset")
    data.add_argument("name", choices=["multi30k"])
    data.add_argument("--dest", required=True, help="directory to put the files in")
    data.add_argument(
        "--from",
        dest="source",
        metavar="DIR",
        help="copy from this local directory instead of downloading",
    )
    data.set_defaults(handler=cmd_data)


def _add_prepare_parser(sub) -> None:
    p = sub.add_parser(
        "prepare",
        help="train a vocabulary and binarise a corpus",
        description="Parallel corpus: --src-lang/--tgt-lang with --train/--valid[/--test] "
        "file prefixes (PREFIX.LANG or PREFIX.LANG.gz). Language-model corpus: --text FILE.",
    )
    p.add_argument("--out", required=True, help="dataset directory to write")
    p.add_argument("--overwrite", action="store_true", help="replace an existing --out")
    p.add_argument("--src-lang")
    p.add_argument("--tgt-lang")
    p.add_argument("--train", metavar="PREFIX")
    p.add_argument("--valid", metavar="PREFIX")
    p.add_argument("--test", metavar="PREFIX", nargs="*", default=[])
    p.add_argument("--vocab-size", type=int, default=10000)
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
    p.add_argument("--max-len", type=int, default=256)
    p.add_argument("--max-len-ratio", type=float, default=9.0)
    p.add_argument("--empty-lines", choices=["drop", "error"], default="drop")
    p.add_argument(
        "--max-tokens",
        type=int,
        default=4096,
        help="batch size used to report the padding fraction",
    )
    p.add_argument("--text", metavar="FILE", help="a language-model corpus (one text file)")
    p.add_argument(
        "--tokenizer",
        choices=["char", "sentencepiece"],
        default="char",
        help="for --text: characters or SentencePiece",
    )
    p.add_argument(
        "--valid-fraction",
        type=float,
        default=0.1,
        help="for --text: the last fraction of characters for validation",
    )
    p.set_defaults(handler=cmd_prepare)


def cmd_info(args: argparse.Namespace) -> int:
    from aiayn.config import model_preset
    from aiayn.models import ModelLoadError, build_model, load_model
    from aiayn.models.summary import parameter_table

    if args.model:
        try:
            model, cfg = load_model(args.model)
        except ModelLoadError as e:
            raise UserError(str(e)) from None
        title = args.model
    else:
        if args.vocab_size <= 0:
            raise UserError("--vocab-size must be positive")
        cfg = model_preset(args.preset).with_vocab(args.vocab_size)
        model = build_model(cfg)
        title = f"preset {args.preset}, vocabulary {args.vocab_size:,}"
    print(f"aiayn model: {title}")
    print(
        f"  d_model={cfg.d_model} h={cfg.n_heads} d_ff={cfg.d_ff} "
        f"N={cfg.n_encoder_layers}+{cfg.n_decoder_layers} "
        f"{'pre' if cfg.norm_first else 'post'}-norm positional={cfg.positional}"
    )
    for name, count in parameter_table(model):
        print(f"  {name:<28} {count:>14,}")
    return 0


def cmd_data(args: argparse.Namespace) -> int:
    from aiayn.data.corpus import CorpusError
    from aiayn.data.multi30k import fetch_multi30k

    try:
        dest = fetch_multi30k(args.dest, source=args.source, log=_log)
    except CorpusError as e:
        raise UserError(str(e)) from None
    print(f"multi30k: all splits present and counted in {dest}")
    return 0


def cmd_prepare(args: argparse.Namespace) -> int:
    import resource
    import time

    from aiayn.config import ConfigError, PrepareConfig
    from aiayn.data import CorpusError, TokenizerError

    start = time.perf_counter()
    try:
        if args.text:
            _prepare_lm(args)
        else:
            missing = [
                f"--{n.replace('_', '-')}"
                for n in ("src_lang", "tgt_lang", "train", "valid")
                if not getattr(args, n)
            ]
            if missing:
                raise UserError(f"a parallel corpus needs {', '.join(missing)} (or --text FILE)")
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
                max_len=args.max_len,
                max_len_ratio=args.max_len_ratio,
                empty_lines=args.empty_lines,
            )
            _prepare_parallel(cfg, args)
    except (CorpusError, TokenizerError, ConfigError, FileExistsError, ValueError) as e:
        raise UserError(str(e)) from None
    peak_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(
        f"prepared {args.out} in {time.perf_counter() - start:.1f}s, peak memory {peak_mb:.0f} MB"
    )
    return 0


def _prepare_parallel(cfg, args: argparse.Namespace) -> None:
    from aiayn.data import TokenBatchSampler, load_prepared, prepare

    prepare(cfg, args.out, overwrite=args.overwrite, log=_log)
    train = load_prepared(args.out).split("train")
    sampler = TokenBatchSampler(train.src.lengths, train.tgt.lengths, max_tokens=args.max_tokens)
    print(f"padding at max_tokens={args.max_tokens}: {sampler.padding_fraction():.1%}")


def _prepare_lm(args: argparse.Namespace) -> None:
    from aiayn.data.lm import prepare_lm

    if Path(args.out).exists() and not args.overwrite:
        raise UserError(f"{args.out} exists (pass --overwrite to replace it)")
    prepare_lm(
        args.text,
        args.out,
        tokenizer=args.tokenizer,
        vocab_size=args.vocab_size,
        valid_fraction=args.valid_fraction,
        log=_log,
    )


def _log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def load_train_config(path: str, overrides: list[str]):
    from aiayn.config import apply_overrides, load_toml, train_config_from_dict

    return train_config_from_dict(apply_overrides(load_toml(path), overrides), where=path)


def cmd_train(args: argparse.Namespace) -> int:
    from aiayn.runtime import tune_allocator

    allocator = tune_allocator()
    from aiayn.config import ConfigError
    from aiayn.data import CorpusError
    from aiayn.models import ModelLoadError
    from aiayn.train import Trainer, TrainingError

    try:
        cfg = load_train_config(args.config, args.set)
        trainer = Trainer(cfg, resume=args.resume, validators=validators_for(cfg))
        trainer.log(f"allocator: {allocator}")
        state = trainer.train()
    except (ConfigError, CorpusError, ModelLoadError, TrainingError) as e:
        raise UserError(str(e)) from None
    if state.best_valid is None:
        best = "no validation"
    elif cfg.run.valid_bleu:
        best = f"best validation BLEU {-state.best_valid:.2f}"
    else:
        best = f"best validation NLL {state.best_valid:.3f}"
    trainer.log(
        f"done: {state.update} updates, {state.tokens:,} target tokens, "
        f"{state.train_seconds:.0f}s training; {best}"
    )
    return 0


def cmd_average(args: argparse.Namespace) -> int:
    from aiayn.models import ModelLoadError
    from aiayn.train.checkpoint import (
        average_checkpoints,
        copy_assets,
        list_checkpoints,
        write_model_dir,
    )

    paths = [Path(p) for p in args.paths]
    if len(paths) == 1 and list_checkpoints(paths[0]):
        paths = list_checkpoints(paths[0])[-args.last :]
    try:
        model, cfg = average_checkpoints(paths)
    except ModelLoadError as e:
        raise UserError(str(e)) from None
    write_model_dir(Path(args.out), model, cfg, copy_assets(paths[-1]))
    print(f"averaged {len(paths)} checkpoints ({paths[0].name} .. {paths[-1].name}) -> {args.out}")
    return 0


def validators_for(cfg) -> list:
    """Extra validation metrics the config asks for (BLEU), for the Trainer."""
    return [bleu_validator(cfg)] if cfg.run.valid_bleu else []


def bleu_validator(cfg):
    """Greedy or beam BLEU on the validation split, from its ids (wired into training)."""
    from aiayn.data import load_prepared
    from aiayn.decode.translator import SearchOptions, Translator
    from aiayn.eval import corpus_scores

    data = load_prepared(cfg.data.dir)
    valid = data.split(cfg.data.valid_split)
    sources = [valid.src[i].tolist() for i in range(len(valid))]
    references = [data.tgt_tokenizer.decode(valid.tgt[i].tolist()) for i in range(len(valid))]
    tokenized = bool(data.manifest["pretokenized"])
    options = SearchOptions(beam=cfg.run.valid_beam, batch_tokens=cfg.data.valid_max_tokens)

    def validate(model) -> dict[str, float]:
        translator = Translator(model, data.src_tokenizer, data.tgt_tokenizer)
        hyps = [t[0].text for t in translator.translate_ids(sources, options)]
        bleu = corpus_scores(hyps, references, tokenized=tokenized).bleu
        return {"bleu": bleu, "bleu_beam": float(options.beam)}

    return validate


def cmd_translate(args: argparse.Namespace) -> int:
    import time

    import torch

    from aiayn.data import CorpusError, TokenizerError, read_lines
    from aiayn.decode.translator import SearchOptions, TranslationError, Translator
    from aiayn.models import ModelLoadError

    if args.threads > 0:
        torch.set_num_threads(args.threads)
    if args.nbest > args.beam:
        raise UserError(f"--nbest {args.nbest} is larger than --beam {args.beam}")
    options = SearchOptions(
        beam=args.beam,
        alpha=args.alpha or None,
        nbest=args.nbest,
        max_len_b=args.max_len_b,
        batch_tokens=args.batch_tokens,
        max_src_len=args.max_src_len,
        on_long=args.on_long,
        precision=args.precision,
    )
    try:
        translator = Translator.from_dir(args.model, device=args.device)
        lines = list(read_lines(args.input)) if args.input else [line.strip() for line in sys.stdin]
        start = time.perf_counter()
        results = translator.translate(lines, options, warn=_log)
        seconds = time.perf_counter() - start
    except (ModelLoadError, TokenizerError, CorpusError, TranslationError) as e:
        raise UserError(str(e)) from None
    out = open(args.output, "w", encoding="utf-8") if args.output else sys.stdout  # noqa: SIM115
    try:
        for i, hyps in enumerate(results):
            if args.nbest == 1:
                print(hyps[0].text, file=out)
            else:
                for h in hyps:
                    print(f"{i} ||| {h.text} ||| {h.score:.4f}", file=out)
    finally:
        if args.output:
            out.close()
    _log(
        f"translated {len(lines)} lines in {seconds:.1f}s ({len(lines) / max(seconds, 1e-9):.1f} "
        "sentences/s)"
    )
    if args.ref:
        tokenized = translator.pretokenized if args.tokenized is None else args.tokenized
        _print_scores([h[0].text for h in results], args.ref, tokenized, file=sys.stderr)
    return 0


def cmd_evaluate(args: argparse.Namespace) -> int:
    from aiayn.data import CorpusError, read_lines

    if args.model or args.text:
        return _evaluate_language_model(args)
    if not (args.hyp and args.ref):
        raise UserError("give --hyp and --ref (translations), or --model and --text (perplexity)")
    try:
        hyps = list(read_lines(args.hyp))
    except CorpusError as e:
        raise UserError(str(e)) from None
    _print_scores(hyps, args.ref, args.tokenized, file=sys.stdout)
    return 0


def _evaluate_language_model(args: argparse.Namespace) -> int:
    import numpy as np

    from aiayn.data import CorpusError
    from aiayn.data.lm import read_text
    from aiayn.decode import load_language_model
    from aiayn.eval.perplexity import stream_perplexity
    from aiayn.models import ModelLoadError

    if not (args.model and args.text):
        raise UserError("perplexity needs both --model and --text")
    try:
        model, tokenizer = load_language_model(args.model)
        text = read_text(args.text)
    except (ModelLoadError, CorpusError) as e:
        raise UserError(str(e)) from None
    ids = np.asarray(tokenizer.encode([text])[0], dtype=np.int64)
    block = min(args.block_size, model.max_context or args.block_size)
    try:
        result = stream_perplexity(model, ids, block_size=block)
    except ValueError as e:
        raise UserError(str(e)) from None
    print(
        f"{args.text}: {result.tokens:,} tokens, NLL {result.nll:.4f} nats/token, "
        f"perplexity {result.perplexity:.3f}, "
        f"{result.bits_per_character(len(text)):.4f} bits/character"
    )
    return 0


def _print_scores(hyps: list[str], ref_file: str, tokenized: bool, *, file) -> None:
    from aiayn.data import CorpusError, read_lines
    from aiayn.eval import corpus_scores

    try:
        refs = list(read_lines(ref_file))
    except CorpusError as e:
        raise UserError(str(e)) from None
    if len(refs) != len(hyps):
        raise UserError(f"{ref_file} has {len(refs)} lines but there are {len(hyps)} hypotheses")
    print(corpus_scores(hyps, refs, tokenized=tokenized), file=file)


def cmd_pipeline(args: argparse.Namespace) -> int:
    from aiayn.runtime import tune_allocator

    allocator = tune_allocator()
    from aiayn.config import ConfigError, apply_overrides, load_toml, recipe_from_dict
    from aiayn.data import CorpusError, TokenizerError
    from aiayn.models import ModelLoadError
    from aiayn.pipeline import default_corpus_dir, run_pipeline
    from aiayn.train import TrainingError

    work = args.work or str(Path("runs") / Path(args.recipe).stem)
    corpus = args.corpus or default_corpus_dir()
    try:
        recipe = recipe_from_dict(
            apply_overrides(load_toml(args.recipe), args.set), where=args.recipe
        )
        _log(
            f"aiayn pipeline {args.recipe} -> {work} (corpus: {corpus or 'download'}; "
            f"allocator: {allocator})"
        )
        result = run_pipeline(
            recipe, work, corpus_from=corpus, log=_log, validators_for=validators_for
        )
    except (ConfigError, CorpusError, TokenizerError, ModelLoadError, TrainingError) as e:
        raise UserError(str(e)) from None
    print(format_results(result, recipe))
    return 0


def format_results(result, recipe) -> str:
    """The results table and example translations, as Markdown."""
    p = recipe.pipeline
    pair = f"{p.src_lang}→{p.tgt_lang}"
    lines = [
        f"## {p.dataset} {pair}, {p.text} text, beam {p.beam}, α {result.alpha}"
        + (" (chosen on the validation set)" if result.alpha_scores else ""),
        "",
        "| test set | BLEU | chrF | sentences/s |",
        "|---|---:|---:|---:|",
    ]
    for t in result.tests:
        lines.append(
            f"| {t.split} | {t.bleu:.2f} | {t.chrf:.2f} | "
            f"{t.sentences / max(t.seconds, 1e-9):.1f} |"
        )
    lines += [
        "",
        f"- training: {result.updates:,} updates, {result.train_tokens:,} target tokens in "
        f"{result.train_seconds / 60:.1f} min ({result.tokens_per_second:,.0f} tokens/s)",
        f"- whole pipeline: {result.total_seconds / 60:.1f} min wall clock ("
        + ", ".join(f"{k} {v:.0f}s" for k, v in result.stage_seconds.items())
        + ")",
        f"- BLEU signature: {result.tests[0].bleu_signature}" if result.tests else "",
        _alpha_line(result),
        "",
        "Examples (test set 1):",
    ]
    for ex in result.tests[0].examples if result.tests else []:
        lines += [
            f"- src: {ex['source']}",
            f"  ref: {ex['reference']}",
            f"  hyp: {ex['translation']}",
        ]
    return "\n".join(lines)


def _alpha_line(result) -> str:
    if not result.alpha_scores:
        return ""
    tried = ", ".join(f"α {a}: {bleu:.2f}" for a, bleu in result.alpha_scores.items())
    return f"- length penalty chosen on the validation set: {tried} -> α {result.alpha}"


def _indices(text: str | None) -> list[int] | None:
    if not text:
        return None
    try:
        return [int(x) - 1 for x in text.split(",")]
    except ValueError:
        raise UserError(f"expected comma-separated numbers, got {text!r}") from None


def cmd_plot_attention(args: argparse.Namespace) -> int:
    from aiayn.decode.translator import SearchOptions, TranslationError, Translator
    from aiayn.models import ModelLoadError
    from aiayn.viz import attention_figure, attention_plot_data, save_figure

    try:
        translator = Translator.from_dir(args.model)
    except (ModelLoadError, TranslationError) as e:
        raise UserError(str(e)) from None
    src_ids = translator.src_tokenizer.encode([args.src.strip()])[0]
    if not src_ids:
        raise UserError("--src is empty")
    if args.tgt is not None:
        tgt_ids = translator.tgt_tokenizer.encode([args.tgt.strip()])[0]
    else:
        [[best]] = translator.translate_ids([src_ids], SearchOptions(beam=args.beam))
        tgt_ids = best.tokens
        _log(f"translation: {best.text}")
    data = attention_plot_data(
        translator.model,
        src_ids,
        tgt_ids,
        src_pieces=translator.src_tokenizer.pieces(src_ids),
        tgt_pieces=translator.tgt_tokenizer.pieces(tgt_ids),
    )
    output = Path(args.output)
    kinds = ["encoder", "decoder", "cross"] if args.kind == "all" else [args.kind]
    for kind in kinds:
        path = (
            output.with_name(f"{output.stem}_{kind}{output.suffix}") if len(kinds) > 1 else (output)
        )
        try:
            figure = attention_figure(
                data, kind, layers=_indices(args.layers), heads=_indices(args.heads)
            )
            save_figure(figure, path)
        except ValueError as e:
            raise UserError(str(e)) from None
        print(path)
    return 0


def cmd_plot_positional(args: argparse.Namespace) -> int:
    from aiayn.viz import positional_figure, save_figure

    if args.d_model % 2 or args.d_model <= 0 or args.length <= 1:
        raise UserError("--d-model must be even and positive, --length at least 2")
    try:
        figure = positional_figure(
            d_model=args.d_model, length=args.length, interleaved=not args.concat
        )
        print(save_figure(figure, args.output))
    except ValueError as e:
        raise UserError(str(e)) from None
    return 0


def cmd_plot_curves(args: argparse.Namespace) -> int:
    from aiayn.viz import curves_figure, save_figure

    try:
        print(save_figure(curves_figure(args.run_dir), args.output))
    except (FileNotFoundError, ValueError) as e:
        raise UserError(str(e)) from None
    return 0


def cmd_generate(args: argparse.Namespace) -> int:
    import torch

    from aiayn.config import EOS_ID
    from aiayn.decode import generate, load_language_model
    from aiayn.models import ModelLoadError

    try:
        model, tokenizer = load_language_model(args.model)
    except ModelLoadError as e:
        raise UserError(str(e)) from None
    prompt = tokenizer.encode([args.prompt])[0]
    if not prompt:
        raise UserError("the prompt is empty after tokenisation")
    generator = torch.Generator().manual_seed(args.seed) if args.seed is not None else None
    produced: list[int] = []
    shown = ""

    def stream(token: int) -> None:
        nonlocal shown
        produced.append(token)
        text = tokenizer.decode(produced)
        sys.stdout.write(text[len(shown) :])
        sys.stdout.flush()
        shown = text

    sys.stdout.write(args.prompt)
    try:
        generate(
            model,
            prompt,
            max_new_tokens=args.max_new_tokens,
            temperature=args.temperature,
            top_k=args.top_k,
            top_p=args.top_p,
            generator=generator,
            stop_id=EOS_ID if args.stop_at_eos else None,
            use_cache=not args.no_cache,
            on_token=stream,
        )
    except ValueError as e:
        raise UserError(str(e)) from None
    sys.stdout.write("\n")
    return 0
