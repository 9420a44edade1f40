"""The decoding guards measured: Multi30k's test2016 and a shouted copy of it (every source
line upper-cased), each decoded with the guards (the defaults) and without, for time, BLEU
and the longest output.

    python bench/guards.py --model DIR [--set 2016] [--src en --tgt de] [--beam 5]
        [--limit N] [--threads N]

Prints one row per (set, guards): seconds, sentences/s, sacreBLEU (standard, cased), BLEU
case-insensitive (a shouted copy's translations come back in capitals: its cased BLEU
against ordinary references measures the case, not the translation), the longest output in
target pieces, and how many outputs are longer than the guards' length bound (0 with the
guards on; counted per line, on the line as the model was given it). Then the ratio of the
shouted set's time to the normal set's (at most 1.5 asked for, with the guards) and BLEU with
the guards minus without, on the normal set (within 0.1 asked for). With the guards, the
shouted set is also decoded with ``all_caps="known"`` (the translation in the model's own
case: what a cased score rewards).

Corpora under ``AIAYN_DATA_DIR`` (default ``../shared/data``): ``multi30k/test_YEAR_flickr.*.gz``.
"""

from __future__ import annotations

import argparse
import gzip
import math
import os
import time
from pathlib import Path

import torch
from sacrebleu.metrics import BLEU

from aiayn.decode.guards import LENGTH_MARGIN
from aiayn.eval import corpus_scores
from aiayn.search_options import SearchOptions
from aiayn.text.case import in_known_case, is_shouted
from aiayn.translate.translator import Translator

UNGUARDED = {"max_len_ratio": 0.0, "repeat_stop": 0, "all_caps": "off"}


def read(path: Path, limit: int | None) -> list[str]:
    with gzip.open(path, "rt", encoding="utf-8") as f:
        lines = [line.rstrip("\n") for line in f]
    return lines[:limit] if limit else lines


def run(translator: Translator, sources, references, options: SearchOptions) -> dict:
    start = time.perf_counter()
    found = translator.translate(sources, options)
    seconds = time.perf_counter() - start
    hyps = [h[0].text for h in found]
    scores = corpus_scores(hyps, references, tgt_lang=translator.tgt_lang)
    uncased = BLEU(lowercase=True).corpus_score(hyps, [references]).score
    lengths = [len(h[0].tokens) + 1 for h in found]  # with EOS
    decoded = [  # what the model was given: shouted lines in the case it knows
        in_known_case([s], translator.count_pieces)[0]
        if options.all_caps != "off" and is_shouted(s)
        else s
        for s in sources
    ]
    src_lengths = [len(ids) + 1 for ids in translator.src_tokenizer.encode(decoded)]
    ratio = SearchOptions().max_len_ratio * (translator.length_ratio or 1.0)
    over = sum(
        1
        for n, s in zip(lengths, src_lengths, strict=True)
        if n > math.ceil(ratio * s) + LENGTH_MARGIN
    )
    return {
        "seconds": seconds,
        "bleu": scores.bleu,
        "uncased": uncased,
        "longest": max(lengths),
        "over": over,
        "warning": scores.outputs.warning if scores.outputs else None,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", required=True)
    parser.add_argument("--set", default="2016")
    parser.add_argument("--src", default="en")
    parser.add_argument("--tgt", default="de")
    parser.add_argument("--beam", type=int, default=5)
    parser.add_argument("--limit", type=int, default=None, help="first N lines only")
    parser.add_argument("--threads", type=int, default=0, help="0: PyTorch's default")
    args = parser.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    root = Path(os.environ.get("AIAYN_DATA_DIR", "../shared/data")) / "multi30k"
    prefix = root / f"test_{args.set}_flickr"
    sources = read(prefix.with_name(prefix.name + f".{args.src}.gz"), args.limit)
    references = read(prefix.with_name(prefix.name + f".{args.tgt}.gz"), args.limit)
    translator = Translator.from_dir(args.model)
    translator.translate(sources[:8], SearchOptions(beam=args.beam))  # packing, warm-up
    shouted = [s.upper() for s in sources]
    print(
        f"model {args.model} (length ratio {translator.length_ratio}), test{args.set}, "
        f"{len(sources)} lines, beam {args.beam}, {torch.get_num_threads()} threads"
    )
    print("| set | guards | seconds | sentences/s | BLEU | BLEU uncased | longest | over bound |")
    print("|---|---|---:|---:|---:|---:|---:|---:|")
    rows = {}
    cases = [
        ("normal", "on", sources, {}),
        ("normal", "off", sources, UNGUARDED),
        ("shouted", "on", shouted, {}),
        ("shouted", "on, all_caps known", shouted, {"all_caps": "known"}),
        ("shouted", "off", shouted, UNGUARDED),
    ]
    for name, guards, lines, fields in cases:
        r = run(translator, lines, references, SearchOptions(beam=args.beam, **fields))
        rows[name, guards] = r
        print(
            f"| {name} | {guards} | {r['seconds']:.1f} | {len(lines) / r['seconds']:.1f} | "
            f"{r['bleu']:.2f} | {r['uncased']:.2f} | {r['longest']} | {r['over']} |"
            + (f" {r['warning']}" if r["warning"] else "")
        )
    on, off = rows["normal", "on"], rows["normal", "off"]
    print(
        f"shouted/normal time with guards: {rows['shouted', 'on']['seconds'] / on['seconds']:.2f}x"
        f" (without: {rows['shouted', 'off']['seconds'] / off['seconds']:.2f}x); normal BLEU "
        f"guards on - off: {on['bleu'] - off['bleu']:+.2f}"
    )


if __name__ == "__main__":
    main()
