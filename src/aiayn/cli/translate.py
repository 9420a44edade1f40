"""``aiayn translate`` (text with a trained model) and ``aiayn evaluate`` (BLEU and chrF of
translations, or a language model's perplexity)."""

from __future__ import annotations

import argparse
import io
import os
import select
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import replace
from pathlib import Path
from typing import BinaryIO, get_args

from aiayn.cli.common import (
    MAX_THREADS,
    UsageError,
    add_search_options,
    integer,
    log,
    search_options,
    search_precision,
)
from aiayn.config import BleuTokenize
from aiayn.text.documents import FORMATS as DOCUMENTS
from aiayn.text.documents import Limits, format_for
from aiayn.translate.routing import RoutedTranslator

# --format: lines of text or HTML, or one whole document (an HTML page is "html-file")
FORMAT_CHOICES = ["text", "html", *(f"{n}-file" if n == "html" else n for n in DOCUMENTS)]
# a document on the command line is the user's own: ten times the server's default bounds
LOCAL_LIMITS = Limits(max_bytes=256 << 20, max_unpacked_bytes=1 << 30)


def add_parsers(sub) -> None:
    t = sub.add_parser("translate", help="translate text with a trained model")
    t.add_argument(
        "--model",
        required=True,
        action="append",
        help="model directory (e.g. RUN/average or RUN/best); repeat it, with --target, for "
        "several language pairs: each line goes to the model of its --source language, and "
        "through English where no model of the pair is given (two decodes)",
    )
    t.add_argument(
        "--source",
        metavar="LANG",
        help="with several --model: the input's language, or auto: found for each line on its "
        "own (default: auto)",
    )
    t.add_argument(
        "--target", metavar="LANG", help="with several --model: the language to translate to"
    )
    t.add_argument(
        "--input",
        "-i",
        type=_file_or_std,
        help="input file, one sentence a line (default or -: stdin)",
    )
    t.add_argument("--output", "-o", type=_file_or_std, help="output file (default or -: stdout)")
    add_search_options(t, "translate")
    t.add_argument(
        "--target-token",
        metavar="TOKEN",
        help="put this token (e.g. >>fra<< for a multilingual opus-mt model) before every line",
    )
    t.add_argument(
        "--format",
        choices=FORMAT_CHOICES,
        help="text: one text a line; html: each line is an HTML document; a document format "
        f"({', '.join(FORMAT_CHOICES[2:])}): the whole --input is one document, translated "
        "with its formatting kept, or a localisation file, its keys and placeholders kept "
        "(default: by --input's suffix, e.g. .docx, .srt, .md, .html, .po, .xlf, .json; "
        "else text)",
    )
    t.add_argument(
        "--scores",
        action="store_true",
        help="each output line is 'confidence<TAB>translation', the confidence in [0, 1]",
    )
    t.add_argument("--ref", help="reference file: print BLEU and chrF after translating")
    t.add_argument(
        "--tokenized",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="score with tokenize='none' (default: with --text raw, when the model's data was "
        "pre-tokenised)",
    )
    _add_tokenize_option(t, "the model's target language")
    t.add_argument(
        "--threads",
        type=integer(minimum=0, maximum=MAX_THREADS),
        default=0,
        help="CPU threads (0: the cores other processes leave idle when it starts)",
    )
    t.add_argument(
        "--profile",
        metavar="NAME",
        help="implementation profile, a name in aiayn.accel.PROFILES: the measured speed "
        "tricks (the default), or the paper's plain modules",
    )
    t.set_defaults(handler=run_translate)
    _add_evaluate_parser(sub)


def _add_evaluate_parser(sub) -> None:
    e = sub.add_parser(
        "evaluate",
        help="score translations (BLEU, chrF), or a language model's perplexity on a text",
        description="Translations: --hyp FILE --ref FILE. Language model: --model DIR --text FILE.",
    )
    e.add_argument("--hyp", help="hypotheses, one a line")
    e.add_argument("--ref", help="references, one a line")
    e.add_argument("--model", help="a language-model directory")
    e.add_argument(
        "--text", dest="text_file", help="with --model: the text to measure perplexity on"
    )
    e.add_argument(
        "--block-size",
        type=integer(minimum=1),
        default=256,
        help="with --model: tokens of context per block (capped by the model)",
    )
    e.add_argument(
        "--tokenized",
        action="store_true",
        help="text is tokenised and lowercased: sacreBLEU tokenize='none'",
    )
    e.add_argument(
        "--tgt-lang",
        "-l",
        metavar="LANG",
        help="the references' language, which chooses BLEU's tokenizer (ko: ko-mecab, ja: "
        "ja-mecab, zh: zh, else 13a), or sacreBLEU's SRC-TGT pair (en-ko: its target); "
        "default: the --ref file's suffix, e.g. test.ko",
    )
    _add_tokenize_option(e, "--tgt-lang")
    e.set_defaults(handler=run_evaluate)


def _add_tokenize_option(parser: argparse.ArgumentParser, language: str) -> None:
    parser.add_argument(
        "--tokenize",
        choices=[t for t in get_args(BleuTokenize) if t],
        help=f"sacreBLEU's BLEU tokenizer (default: chosen by {language}: ko-mecab for "
        "Korean, ja-mecab for Japanese, zh for Chinese, else 13a)",
    )


def _bleu_tokenize(tokenized: bool | None, tokenize: str | None) -> str | None:
    """The tokenizer asked for: ``--tokenized`` is ``--tokenize none``; both may not differ."""
    if tokenized and tokenize not in (None, "none"):
        raise UsageError(f"--tokenized means --tokenize none, not --tokenize {tokenize}")
    return "none" if tokenized else tokenize


def _suffix_language(path: str) -> str:
    """``test.ko`` and ``test.ko.gz`` -> ``ko``; '' when the name has no suffix."""
    name = Path(path).name.removesuffix(".gz")
    return Path(name).suffix.lstrip(".")


def run_translate(args: argparse.Namespace) -> int:
    from aiayn.memory import limit_kernel_cache

    limit_kernel_cache()
    import torch

    from aiayn.data import read_lines
    from aiayn.data.corpus import decode_lines
    from aiayn.runtime import cpu_sample, idle_cores, select_device
    from aiayn.translate.translator import Translator

    before_loading = cpu_sample()
    # options that do not fit together, and the glossary, before any work
    options = search_options(args, format="html" if args.format == "html" else "text")
    if options.text == "raw" and (options.glossary is not None or options.protect_patterns):
        log(
            "warning: --text raw gives the subword model its text untouched: --glossary and "
            "--protect apply to natural text only, and are not used"
        )
    _check_writable(args.output)
    device = select_device(args.device)
    references = list(read_lines(args.ref)) if args.ref else None
    translator = _translator(
        args, lambda m: Translator.from_dir(m, device=str(device), profile=args.profile)
    )
    torch.set_num_threads(args.threads or idle_cores(since=before_loading))
    options = replace(options, precision=search_precision(args.precision, device))
    translator.check(options)
    document = _document_format(args.format, args.input)
    if document is not None:
        return _translate_document(translator, document, options, args)
    if args.input or args.output or references is not None:
        if args.input:
            lines = list(read_lines(args.input))
        else:
            lines = list(decode_lines(sys.stdin.buffer, "<stdin>"))
        if references is not None and len(references) != len(lines):
            raise UsageError(f"{args.ref} has {len(references)} lines, the input has {len(lines)}")
        start = time.perf_counter()
        results = translator.translate(lines, options, warn=log, target_token=args.target_token)
        seconds = time.perf_counter() - start
        _write(args.output, "".join(_format(i, h, args) for i, h in enumerate(results)))
    else:  # standard input to standard output: each line answered once it is read
        lines, results, seconds = [], [], 0.0
        for chunk in ready_lines(sys.stdin.buffer):
            start = time.perf_counter()
            found = translator.translate(chunk, options, warn=log, target_token=args.target_token)
            seconds += time.perf_counter() - start
            first = len(lines)
            _write(None, "".join(_format(first + i, h, args) for i, h in enumerate(found)))
            lines += chunk
            results += found
    log(
        f"translated {len(lines)} lines in {seconds:.1f}s ({len(lines) / max(seconds, 1e-9):.1f} "
        "sentences/s)"
    )
    if references is not None:
        from aiayn.eval import corpus_scores

        tokenized = args.tokenized
        if tokenized is None:
            tokenized = translator.pretokenized and args.text == "raw"
        tokenize = _bleu_tokenize(tokenized, args.tokenize)
        hyps = [h[0].text for h in results]
        scores = corpus_scores(hyps, references, tgt_lang=translator.tgt_lang, tokenize=tokenize)
        print(scores, file=sys.stderr)
    return 0


def _translator(args: argparse.Namespace, load):
    """The one model given, or several behind a ``RoutedTranslator`` (with --target)."""
    if len(args.model) == 1 and args.source is None and args.target is None:
        return load(args.model[0])
    if args.target is None:
        raise UsageError("with several --model (or --source), give --target")
    return RoutedTranslator([load(m) for m in args.model], args.source or "auto", args.target)


def _document_format(chosen: str | None, input_file: str | None) -> str | None:
    """The document format ``--format`` names, else the one ``--input``'s suffix names;
    None: the input is lines."""
    if chosen in ("text", "html"):
        return None
    if chosen is not None:
        return chosen.removesuffix("-file")
    found = format_for(input_file) if input_file else None
    return found.name if found else None


def _translate_document(translator, document: str, options, args: argparse.Namespace) -> int:
    """``--input`` (or standard input) translated as one ``document`` to ``--output``."""
    if args.nbest > 1 or args.ref or args.scores:
        raise UsageError(
            f"--nbest, --ref and --scores are for lines of text, not a {document} document"
        )
    what = args.input or "<stdin>"
    if args.input:
        try:
            data = Path(args.input).read_bytes()
        except OSError as e:
            raise UsageError(f"--input {args.input}: {e.strerror}") from None
    else:
        data = sys.stdin.buffer.read()
    start = time.perf_counter()
    out = translator.translate_document(
        data,
        document,
        options,
        what=what,
        limits=LOCAL_LIMITS,
        warn=log,
        target_token=args.target_token,
        report=log,
    )
    _write(args.output, out)
    log(f"translated {what} ({document}) in {time.perf_counter() - start:.1f}s")
    return 0


def ready_lines(stream: BinaryIO, *, most: int = 4096) -> Iterator[list[str]]:
    """The lines of ``stream`` in chunks: each chunk holds the lines read before the
    stream had nothing more ready (a pipe that stays open gets each line answered as it
    comes; a file is read in chunks of up to ``most`` lines).

    Raises:
        CorpusError: a line is not valid UTF-8 (naming it).
    """
    from aiayn.data.corpus import CorpusError

    read, ready = _reader(stream)
    pending, chunk, line_no = b"", [], 0
    while True:
        data = read()
        if data:
            *complete, pending = (pending + data).split(b"\n")
        else:
            complete, pending = ([pending] if pending else []), b""
        for raw in complete:
            line_no += 1
            try:
                chunk.append(raw.decode("utf-8").strip())
            except UnicodeDecodeError as e:
                raise CorpusError(
                    f"<stdin>: line {line_no}: invalid UTF-8 ({e.reason} at byte {e.start})"
                ) from None
        more = bool(data) and ready()
        if chunk and (not more or len(chunk) >= most):
            yield chunk
            chunk = []
        if not data:
            return


def _reader(stream: BinaryIO) -> tuple[Callable[[], bytes], Callable[[], bool]]:
    """How to read ``stream`` without waiting for more than is there, and whether more is
    ready now: through its file descriptor where it has one that ``select`` can watch (a pipe,
    a terminal, a file), else (an in-memory stream, a Windows pipe) by its own ``read1``,
    which never says more is ready, so a chunk ends at each read."""
    try:
        fd = stream.fileno()
        select.select([fd], [], [], 0)
    except (AttributeError, OSError, ValueError, io.UnsupportedOperation):
        return (lambda: stream.read1(1 << 16)), (lambda: False)
    return (lambda: os.read(fd, 1 << 16)), (lambda: bool(select.select([fd], [], [], 0)[0]))


def _format(index: int, hyps, args: argparse.Namespace) -> str:
    """One input line's output: its translation (with --scores, after its confidence and a
    tab), or with --nbest its hypotheses 'N ||| text ||| score' (and '||| confidence'). A
    line given back below --min-confidence is said on standard error."""
    if hyps[0].flagged:
        log(
            f"line {index + 1}: confidence {hyps[0].confidence:.3f} is below --min-confidence "
            f"{args.min_confidence:g}: the source is given back"
        )
    if args.nbest == 1 or hyps[0].flagged:
        return f"{hyps[0].confidence:.4f}\t{hyps[0].text}\n" if args.scores else f"{hyps[0].text}\n"
    extra = (lambda h: f" ||| {h.confidence:.4f}") if args.scores else (lambda h: "")
    return "".join(f"{index} ||| {h.text} ||| {h.score:.4f}{extra(h)}\n" for h in hyps)


def _file_or_std(value: str) -> str | None:
    """A file's path; ``-`` (as for most commands): standard input or output, None."""
    return None if value == "-" else value


def _check_writable(output: str | None) -> None:
    """Fail before the work, not after, when ``output`` cannot be written."""
    if output is None:
        return
    path = Path(output)
    if path.is_dir():
        raise UsageError(f"--output {output}: is a directory")
    parent = path.parent if str(path.parent) else Path(".")
    if not parent.is_dir():
        raise UsageError(f"--output {output}: directory {parent} does not exist")
    if not os.access(parent, os.W_OK) or (path.exists() and not os.access(path, os.W_OK)):
        raise UsageError(f"--output {output}: not writable")


def _write(output: str | None, text: str | bytes) -> None:
    if output is None:
        if isinstance(text, bytes):
            sys.stdout.buffer.write(text)
            sys.stdout.buffer.flush()
            return
        sys.stdout.write(text)
        sys.stdout.flush()
        return
    path = Path(output)
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    try:
        tmp.write_bytes(text if isinstance(text, bytes) else text.encode("utf-8"))
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)


def run_evaluate(args: argparse.Namespace) -> int:
    from aiayn.data import read_lines

    if args.model or args.text_file:
        return _evaluate_language_model(args)
    if not (args.hyp and args.ref):
        raise UsageError("give --hyp and --ref (translations), or --model and --text (perplexity)")
    from aiayn.eval import corpus_scores

    tokenize = _bleu_tokenize(args.tokenized, args.tokenize)
    hyps, refs = list(read_lines(args.hyp)), list(read_lines(args.ref))
    if len(refs) != len(hyps):
        raise UsageError(f"{args.ref} has {len(refs)} lines, {args.hyp} has {len(hyps)}")
    tgt_lang = args.tgt_lang or _suffix_language(args.ref)
    print(corpus_scores(hyps, refs, tgt_lang=tgt_lang, tokenize=tokenize))
    return 0


def _evaluate_language_model(args: argparse.Namespace) -> int:
    import numpy as np

    from aiayn.data.lm_stream import read_text
    from aiayn.decode import load_language_model
    from aiayn.eval.perplexity import stream_perplexity

    if not (args.model and args.text_file):
        raise UsageError("perplexity needs both --model and --text")
    model, tokenizer = load_language_model(args.model)
    text = read_text(args.text_file)
    ids = np.asarray(tokenizer.encode([text])[0], dtype=np.int64)
    block = min(args.block_size, model.max_context or args.block_size)
    result = stream_perplexity(model, ids, block_size=block)
    print(
        f"{args.text_file}: {result.tokens:,} tokens, NLL {result.nll:.4f} nats/token, "
        f"perplexity {result.perplexity:.3f}, "
        f"{result.bits_per_character(len(text)):.4f} bits/character"
    )
    return 0
