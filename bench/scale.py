"""Scale: a WMT14-sized parallel corpus through ``aiayn prepare`` and the trainer.

    python bench/scale.py [--pairs 4500000] [--workers 2] [--updates 200] [--keep DIR]

Builds a synthetic En–De corpus of ``--pairs`` pairs in a temporary directory (never in the
repository) from the shared Multi30k files: each pair joins a few Multi30k pairs so that the
source lengths follow a WMT-like log-normal distribution (median ~21 words, long tail), and
one word in fifty is replaced on both sides by a word from a 200,000-word Zipfian list, so
that a 32k vocabulary has as much to learn as on news text. Then it measures, each command
in its own process, the whole process tree's peak RSS sampled from /proc:

- ``aiayn prepare --workers N``: wall time, pairs/s, peak RSS;
- building one epoch's batches (``TokenBatchSampler.batches``) for the prepared corpus;
- ``aiayn train`` for ``--updates`` updates of a small model on the 4.5M-pair dataset and on a
  29k-pair one of the same distribution: RSS and batches/s.

Targets on a 2-core machine: prepare ≤ 10 min with peak RSS ≤ 3 GB; trainer RSS at 4.5M
pairs within 15% of 29k; an epoch's batches in ≤ 10 s.
"""

from __future__ import annotations

import argparse
import gzip
import itertools
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from common import tree_rss

ROOT = Path(__file__).resolve().parents[1]
DATA = Path(os.environ.get("AIAYN_DATA_DIR", ROOT.parent / "shared" / "data"))
SMALL_PAIRS = 29_000  # Multi30k's size


def multi30k_pairs() -> list[tuple[str, str]]:
    def lines(lang: str) -> list[str]:
        with gzip.open(DATA / "multi30k" / f"train.{lang}.gz", "rt", encoding="utf-8") as f:
            return [line.strip() for line in f]

    return list(zip(lines("en"), lines("de"), strict=True))


def zipf_words(n: int, rng: random.Random) -> list[str]:
    syllables = [c + v for c in "bcdfghklmnprstvwz" for v in "aeiou"] + ["sch", "ung", "ter"]
    return ["".join(rng.choices(syllables, k=rng.randint(2, 5))) for _ in range(n)]


def write_corpus(directory: Path, pairs: int, seed: int = 0) -> Path:
    """``directory/train.{en,de}.gz`` of ``pairs`` synthetic pairs, and a 3,000-pair valid."""
    directory.mkdir(parents=True, exist_ok=True)
    rng = random.Random(seed)
    base = multi30k_pairs()
    words = zipf_words(200_000, rng)
    cumulative = list(itertools.accumulate(1.0 / (rank + 1) for rank in range(len(words))))
    for split, count in (("train", pairs), ("valid", 3000)):
        with (
            gzip.open(directory / f"{split}.en.gz", "wt", encoding="utf-8", compresslevel=1) as en,
            gzip.open(directory / f"{split}.de.gz", "wt", encoding="utf-8", compresslevel=1) as de,
        ):
            for _ in range(count):
                target = min(150, max(1, int(rng.lognormvariate(3.05, 0.6))))  # words
                src, tgt = [], []
                while len(src) < target:  # whole Multi30k pairs, joined
                    s, t = rng.choice(base)
                    src += s.split()
                    tgt += t.split()
                if target < len(src) // 2:  # a short line (a headline): both sides cut
                    src, tgt = src[:target], tgt[:target]
                rare = rng.choices(words, cum_weights=cumulative, k=max(1, len(src) // 50))
                for word in rare:
                    src[rng.randrange(len(src))] = word
                    tgt[rng.randrange(len(tgt))] = word
                en.write(" ".join(src) + "\n")
                de.write(" ".join(tgt) + "\n")
    return directory


class PeakRSS:
    """The largest summed RSS of a process and its descendants, sampled every 0.2 s."""

    def __init__(self, pid: int):
        self.pid, self.peak, self._done = pid, 0, threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._done.wait(0.2):
            self.peak = max(self.peak, tree_rss(self.pid))

    def stop(self) -> int:
        self._done.set()
        self._thread.join()
        return self.peak


def measured(argv: list[str], env: dict | None = None) -> tuple[float, int, str]:
    """Wall seconds, peak RSS of the process tree, and stderr of a command."""
    start = time.perf_counter()
    proc = subprocess.Popen(
        argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, env=env
    )
    rss = PeakRSS(proc.pid)
    _, err = proc.communicate()
    peak = rss.stop()
    if proc.returncode:
        raise SystemExit(f"{' '.join(argv)} failed:\n{err[-2000:]}")
    return time.perf_counter() - start, peak, err


def prepare(corpus: Path, out: Path, workers: int) -> tuple[float, int, str]:
    return measured(
        [
            sys.executable,
            "-m",
            "aiayn",
            "prepare",
            "--src-lang",
            "en",
            "--tgt-lang",
            "de",
            "--train",
            str(corpus / "train"),
            "--valid",
            str(corpus / "valid"),
            "--vocab-size",
            "32000",
            "--workers",
            str(workers),
            "--out",
            str(out),
        ]
    )


EPOCH = """
import sys, time
from aiayn.data import TokenBatchSampler, load_prepared
train = load_prepared(sys.argv[1]).split("train")
sampler = TokenBatchSampler(train.src.lengths, train.tgt.lengths, max_tokens=4096, seed=1)
start = time.perf_counter()
batches = sampler.batches(0)
print(len(batches), time.perf_counter() - start)
"""


def epoch_batches(data: Path) -> tuple[int, float]:
    out = subprocess.run(
        [sys.executable, "-c", EPOCH, str(data)], capture_output=True, text=True, check=True
    ).stdout.split()
    return int(out[0]), float(out[1])


def train(data: Path, run: Path, updates: int) -> tuple[float, int, float]:
    """Wall seconds, peak RSS and updates per second of the training loop."""
    config = run.with_suffix(".toml")
    config.write_text(
        f'[model]\npreset = "tiny"\n[data]\ndir = "{data}"\nmax_tokens = 4096\n'
        f'[optim]\nschedule = "inverse_sqrt"\nlr = 0.001\nwarmup_steps = 100\n'
        f'[run]\ndir = "{run}"\nmax_updates = {updates}\nlog_every = {updates}\n'
        f'valid_every = {updates * 10}\nsave_every = {updates * 10}\nprecision = "auto"\n'
    )
    seconds, peak, _ = measured([sys.executable, "-m", "aiayn", "train", str(config)])
    rows = [json.loads(line) for line in (run / "metrics.jsonl").open()]
    tokens_per_s = [r["tokens_per_s"] for r in rows if r["kind"] == "train"][-1]
    return seconds, peak, tokens_per_s


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--pairs", type=int, default=4_500_000)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--updates", type=int, default=200)
    parser.add_argument("--keep", help="build the corpus and datasets here and keep them")
    args = parser.parse_args()
    work = Path(args.keep) if args.keep else Path(tempfile.mkdtemp(prefix="aiayn-scale-"))
    try:
        run_bench(work, args)
    finally:
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)


def run_bench(work: Path, args) -> None:
    big, small = work / "corpus_big", work / "corpus_small"
    for corpus, pairs in ((big, args.pairs), (small, SMALL_PAIRS)):
        if not (corpus / "train.de.gz").is_file():
            start = time.perf_counter()
            write_corpus(corpus, pairs)
            print(f"corpus of {pairs:,} pairs written in {time.perf_counter() - start:.0f}s")
    print(f"\n{'':34} {'pairs':>11} {'wall':>9} {'pairs/s':>9} {'peak RSS':>10}")
    for corpus, name in ((big, "data_big"), (small, "data_small")):
        shutil.rmtree(work / name, ignore_errors=True)
        seconds, peak, _ = prepare(corpus, work / name, args.workers)
        pairs = json.loads((work / name / "manifest.json").read_text())["splits"]["train"]["pairs"]
        print(
            f"{'prepare --workers ' + str(args.workers):34} {pairs:>11,} {seconds:>8.0f}s "
            f"{pairs / seconds:>9,.0f} {peak / 2**30:>8.2f} GB",
            flush=True,
        )
    count, seconds = epoch_batches(work / "data_big")
    print(f"\nan epoch's batches at 4,096 tokens: {count:,} batches in {seconds:.1f}s")
    print(
        f"\n{'trainer, ' + str(args.updates) + ' updates (tiny, bf16)':34} {'peak RSS':>10} "
        f"{'updates/s':>10} {'tok/s':>8}"
    )
    results = {}
    for name in ("data_small", "data_big"):
        shutil.rmtree(work / f"run_{name}", ignore_errors=True)
        seconds, peak, tokens_per_s = train(work / name, work / f"run_{name}", args.updates)
        results[name] = peak
        print(
            f"{name:34} {peak / 2**30:>8.2f} GB {args.updates / seconds:>10.2f} "
            f"{tokens_per_s:>8,.0f}",
            flush=True,
        )
    print(f"trainer RSS, 4.5M / 29k pairs: {results['data_big'] / results['data_small']:.3f}")


if __name__ == "__main__":
    main()
