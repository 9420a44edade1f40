"""Threads on a busy machine: aiayn's default thread count (the cores other processes leave
idle, ``aiayn.runtime.idle_cores``) against fixed counts, on a quiet machine and beside one
competing process that keeps a core busy (a one-thread PyTorch matrix product loop, as
another user's job would).

    python bench/threads.py [--steps 12] [--model DIR --lines 300]

Training: target tokens/s of the Transformer-Tiny training step on Multi30k-shaped batches
(``bench/train.py``'s, fp32), each row in its own process. With ``--model``, decoding too:
``aiayn translate`` as a user runs it, whole process timed, on the first ``--lines`` lines of
Multi30k's test2016 source (under ``AIAYN_DATA_DIR``, default ``../shared/data``). Threads
"default" is what aiayn picks by itself. Prints medians and, for each setting, the busy
machine's speed as a fraction of the quiet machine's with the same threads.
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from functools import partial
from pathlib import Path

from common import instruction_set, measure_in_subprocess

THREADS = ("default", "1", "2")
COMPETITOR = "import torch; torch.set_num_threads(1); a = torch.randn(384, 384)\nwhile True: a @ a"


def train_worker(threads: str, steps: int) -> dict:
    import torch
    from train import training_step

    from aiayn.runtime import idle_cores

    step_once, (_, _, tgt_out) = training_step("aiayn", "tiny", "fp32", "cpu", 146, "multi30k")
    torch.set_num_threads(idle_cores() if threads == "default" else int(threads))
    tokens = int((tgt_out != 0).sum())
    times = []
    for step in range(steps + 2):  # two warm-up steps
        begin = time.perf_counter()
        step_once()
        if step >= 2:
            times.append(time.perf_counter() - begin)
    return {"value": tokens / statistics.median(times), "threads": torch.get_num_threads()}


def train_row(threads: str, steps: int) -> dict | str:
    return measure_in_subprocess(__file__, [threads], "tuned", ["--steps", str(steps)])


def translate_row(threads: str, model: str, source: Path) -> dict | str:
    command = ["aiayn", "translate", "--model", model, "--input", str(source)]
    command += ["--output", os.devnull]
    command += ["--threads", "0" if threads == "default" else threads]
    begin = time.perf_counter()
    proc = subprocess.run(command, capture_output=True, text=True)
    seconds = time.perf_counter() - begin
    if proc.returncode != 0:
        return (proc.stderr.strip().splitlines() or ["failed"])[-1]
    lines = sum(1 for _ in source.open(encoding="utf-8"))
    return {"value": lines / seconds, "threads": None}


def with_competitor(measure, busy: bool):
    """``measure()`` on a quiet machine, or beside a process that keeps one core busy."""
    if not busy:
        return measure()
    competitor = subprocess.Popen([sys.executable, "-c", COMPETITOR])
    try:
        time.sleep(2.0)  # started and spinning before the measured process looks
        return measure()
    finally:
        competitor.kill()
        competitor.wait()


def table(title: str, unit: str, measure, repeats: int) -> None:
    print(f"\n{title} ({unit}, median of {repeats})")
    print(f"  {'threads':9} {'quiet':>10} {'busy':>10} {'busy/quiet':>11}  threads used")
    for threads in THREADS:
        values, used = {}, {}
        for busy in (False, True):
            runs = [with_competitor(partial(measure, threads), busy) for _ in range(repeats)]
            failed = [r for r in runs if isinstance(r, str)]
            if failed:
                print(f"  {threads:9} failed: {failed[0]}")
                return
            values[busy] = statistics.median(r["value"] for r in runs)
            used[busy] = sorted({r["threads"] for r in runs if r["threads"]})
        ratio = values[True] / values[False]
        row = f"  {threads:9} {values[False]:>10,.1f} {values[True]:>10,.1f} {ratio:>10.2f}x"
        print(f"{row}  {used[False] or ''} / {used[True] or ''}", flush=True)


def source_lines(count: int, folder: str) -> Path:
    data = Path(os.environ.get("AIAYN_DATA_DIR", "../shared/data"))
    with gzip.open(data / "multi30k" / "test_2016_flickr.en.gz", "rt", encoding="utf-8") as f:
        lines = [line for _, line in zip(range(count), f, strict=False)]
    path = Path(folder) / "test2016.en"
    path.write_text("".join(lines), encoding="utf-8")
    return path


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=12)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--model", help="a model directory: adds aiayn translate's rows")
    parser.add_argument("--lines", type=int, default=300)
    parser.add_argument("--worker", choices=THREADS)
    args = parser.parse_args()
    if args.worker:
        print(json.dumps(train_worker(args.worker, args.steps)))
        return
    print(instruction_set())
    table(
        "training step, Transformer-Tiny, fp32",
        "target tokens/s",
        lambda threads: train_row(threads, args.steps),
        args.repeats,
    )
    if args.model:
        with tempfile.TemporaryDirectory() as folder:
            source = source_lines(args.lines, folder)
            table(
                f"aiayn translate, {args.lines} lines of test2016, whole process",
                "sentences/s",
                lambda threads: translate_row(threads, args.model, source),
                args.repeats,
            )


if __name__ == "__main__":
    main()
