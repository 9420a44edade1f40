"""nanoGPT's CPU "baby GPT" on Shakespeare characters: aiayn and nanoGPT side by side, each
timed as a user runs it (the commands' processes, start to exit), then cached generation.

    python bench/lm_shakespeare.py [--nanogpt DIR] [--rounds 3] [--repeats 5] [--set KEY=VALUE]

aiayn's whole run is ``aiayn prepare --text`` + ``aiayn train configs/shakespeare_char.toml``
on $AIAYN_DATA_DIR/tinyshakespeare. With ``--nanogpt DIR`` (a checkout of karpathy/nanoGPT),
each round also runs nanoGPT's ``data/shakespeare_char/prepare.py`` (on the same text, copied
in, so nothing is downloaded) + ``train.py`` with its README's CPU settings, in a scratch
copy. ``--set`` overrides fields of aiayn's config (e.g. nanoGPT's exact recipe, given in the
config's comment). Rounds alternate the two systems, so a slow spell of this shared machine
falls on both; medians are printed with the ratio. Then times 256 sampled tokens with and
without the KV cache.
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
NANOGPT_CPU = [  # nanoGPT README, "baby GPT" on a CPU
    "config/train_shakespeare_char.py",
    "--device=cpu",
    "--compile=False",
    "--eval_iters=20",
    "--log_interval=1",
    "--block_size=64",
    "--batch_size=12",
    "--n_layer=4",
    "--n_head=4",
    "--n_embd=128",
    "--max_iters=2000",
    "--lr_decay_iters=2000",
    "--dropout=0.0",
]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--nanogpt", type=Path, help="a checkout of karpathy/nanoGPT")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--repeats", type=int, default=5, help="timed generations per mode")
    parser.add_argument(
        "--set",
        dest="overrides",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="override a field of configs/shakespeare_char.toml for aiayn's runs (repeatable)",
    )
    args = parser.parse_args()
    data_dir = Path(os.environ.get("AIAYN_DATA_DIR", ROOT.parent / "shared" / "data"))
    text = data_dir / "tinyshakespeare" / "input.txt.gz"
    work = Path(tempfile.mkdtemp(prefix="aiayn-lm-bench-"))
    runs: dict[str, list[tuple[float, float]]] = {"aiayn": [], "nanoGPT": []}
    try:
        for round_ in range(args.rounds):
            runs["aiayn"].append(_aiayn_run(text, work / f"aiayn{round_}", args.overrides))
            if args.nanogpt:
                runs["nanoGPT"].append(_nanogpt_run(args.nanogpt, text, work / f"nano{round_}"))
            print(
                f"round {round_ + 1}: "
                + ", ".join(
                    f"{name} {r[-1][0]:.1f} s (val {r[-1][1]:.3f})" for name, r in runs.items() if r
                ),
                flush=True,
            )
        cached, uncached = _generation_times(
            work / f"aiayn{args.rounds - 1}" / "run" / "best", args.repeats
        )
    finally:
        shutil.rmtree(work, ignore_errors=True)
    _report(runs, args.rounds)
    print(
        f"256 new tokens, median of {args.repeats}: cached {cached:.3f}s, "
        f"uncached {uncached:.3f}s, cache speed-up {uncached / cached:.2f}x"
    )


def _timed(command: list[str], cwd: Path) -> tuple[float, str]:
    """Wall seconds of ``command`` from start to exit, and its output; stops on failure."""
    begin = time.perf_counter()
    proc = subprocess.run(command, cwd=cwd, capture_output=True, text=True)
    seconds = time.perf_counter() - begin
    if proc.returncode != 0:
        sys.exit(f"{' '.join(command)} failed:\n{proc.stdout[-2000:]}{proc.stderr[-2000:]}")
    return seconds, proc.stdout + proc.stderr


def _aiayn_run(text: Path, work: Path, overrides: list[str]) -> tuple[float, float]:
    """Whole-run seconds and final validation loss of aiayn's prepare + train commands."""
    work.mkdir(parents=True)
    prepare, _ = _timed(["aiayn", "prepare", "--text", str(text), "--out", "data"], work)
    train, _ = _timed(
        [
            "aiayn",
            "train",
            str(ROOT / "configs" / "shakespeare_char.toml"),
            "--set",
            'data.dir="data"',
            "--set",
            'run.dir="run"',
            *(arg for override in overrides for arg in ("--set", override)),
        ],
        work,
    )
    rows = [json.loads(line) for line in (work / "run" / "metrics.jsonl").open()]
    valid = [row for row in rows if row["kind"] == "valid"]
    return prepare + train, valid[-1]["nll"]


def _nanogpt_run(checkout: Path, text: Path, work: Path) -> tuple[float, float]:
    """Whole-run seconds and final validation loss of nanoGPT's prepare.py + train.py."""
    shutil.copytree(checkout, work, ignore=shutil.ignore_patterns(".git", "out*"))
    with gzip.open(text, "rb") as src:
        (work / "data" / "shakespeare_char" / "input.txt").write_bytes(src.read())
    prepare, _ = _timed([sys.executable, "data/shakespeare_char/prepare.py"], work)
    train, log = _timed([sys.executable, "train.py", *NANOGPT_CPU], work)
    losses = re.findall(r"step \d+: train loss [\d.]+, val loss ([\d.]+)", log)
    return prepare + train, float(losses[-1])


def _report(runs: dict[str, list[tuple[float, float]]], rounds: int) -> None:
    print("allocators: aiayn tunes glibc malloc itself (aiayn.memory); nanoGPT: default glibc")
    print(f"medians of {rounds} rounds    {'wall s':>8} {'val loss':>9}")
    walls = {}
    for name, results in runs.items():
        if results:
            walls[name] = statistics.median(r[0] for r in results)
            loss = statistics.median(r[1] for r in results)
            print(f"{name:26} {walls[name]:>8.1f} {loss:>9.3f}")
    if len(walls) == 2:
        print(f"aiayn / nanoGPT wall time: {walls['aiayn'] / walls['nanoGPT']:.2f}x")


def _generation_times(model_dir: Path, repeats: int) -> tuple[float, float]:
    import torch

    from aiayn.decode import generate, load_language_model

    torch.set_num_threads(2)
    model, _ = load_language_model(model_dir)
    prompt = [5, 6, 7, 8]
    times: dict[bool, list[float]] = {True: [], False: []}
    for _ in range(repeats):
        for use_cache in (True, False):
            g = torch.Generator().manual_seed(0)
            begin = time.perf_counter()
            generate(model, prompt, max_new_tokens=256, generator=g, use_cache=use_cache)
            times[use_cache].append(time.perf_counter() - begin)
    return statistics.median(times[True]), statistics.median(times[False])


if __name__ == "__main__":
    main()
