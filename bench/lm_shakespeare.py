"""aiayn's side of nanoGPT's CPU "baby GPT" on Shakespeare characters, and cached generation.

    python bench/lm_shakespeare.py [--threads 2]

Trains configs/shakespeare_char.toml (prepared from $AIAYN_DATA_DIR/tinyshakespeare) and
prints the validation loss at iteration 2000, the wall time of the whole run and ms per
iteration, next to nanoGPT's figures measured on this machine (2 threads, default allocator):
validation loss 1.886, 100 s, 46 ms/iteration. Then times 256 sampled tokens with and
without the KV cache.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import tempfile
import time
from pathlib import Path

import torch

from aiayn.config_io import load_train_config
from aiayn.data.lm import prepare_lm
from aiayn.decode import generate, load_language_model
from aiayn.runtime import tune_allocator
from aiayn.train import Trainer

ROOT = Path(__file__).resolve().parents[1]
NANOGPT = {"val_loss": 1.886, "wall_s": 100.0, "ms_per_iter": 46.0}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--repeats", type=int, default=5, help="timed generations per mode")
    args = parser.parse_args()
    allocator = tune_allocator()
    torch.set_num_threads(args.threads)
    data_dir = Path(os.environ.get("AIAYN_DATA_DIR", ROOT.parent / "shared" / "data"))
    text = data_dir / "tinyshakespeare" / "input.txt.gz"
    work = Path(tempfile.mkdtemp(prefix="aiayn-lm-bench-"))
    try:
        prepare_lm(text, work / "data")
        cfg = load_train_config(
            str(ROOT / "configs" / "shakespeare_char.toml"),
            [f'data.dir="{work / "data"}"', f'run.dir="{work / "run"}"'],
        )
        start = time.perf_counter()
        state = Trainer(cfg).train()
        wall = time.perf_counter() - start
        model, _ = load_language_model(work / "run" / "best")
        cached, uncached = _generation_times(model, args.repeats)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    ms_iter = 1000 * state.train_seconds / state.update
    print(f"allocator: {allocator}; threads: {args.threads}")
    print(f"{'':28} {'aiayn':>10} {'nanoGPT':>10} {'ratio':>8}")
    print(f"{'val loss @ 2000':28} {state.best_valid:>10.3f} {NANOGPT['val_loss']:>10.3f}")
    print(
        f"{'wall time, whole run (s)':28} {wall:>10.1f} {NANOGPT['wall_s']:>10.1f} "
        f"{NANOGPT['wall_s'] / wall:>7.2f}x"
    )
    print(
        f"{'ms / iteration':28} {ms_iter:>10.1f} {NANOGPT['ms_per_iter']:>10.1f} "
        f"{NANOGPT['ms_per_iter'] / ms_iter:>7.2f}x"
    )
    print(
        f"256 new tokens, median of {args.repeats}: cached {cached:.3f}s, "
        f"uncached {uncached:.3f}s, cache speed-up {uncached / cached:.2f}x"
    )


def _generation_times(model, repeats: int) -> tuple[float, float]:
    prompt = [5, 6, 7, 8]
    times = {True: [], False: []}
    for _ in range(repeats):
        for use_cache in (True, False):
            g = torch.Generator().manual_seed(0)
            begin = time.perf_counter()
            generate(model, prompt, max_new_tokens=256, generator=g, use_cache=use_cache)
            times[use_cache].append(time.perf_counter() - begin)
    return statistics.median(times[True]), statistics.median(times[False])


if __name__ == "__main__":
    main()
