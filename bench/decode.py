"""Decoding speed, side by side: aiayn (KV cache) vs Hugging Face Marian vs a no-cache loop.

    python bench/decode.py [--sizes tiny base] [--repeats 3]

Sentences per second for greedy search and beam 5 on a batch of 64 sentences of 15 source
tokens (Multi30k length), with exactly 40 decoding steps for every system (EOS is held back
until the last step), random weights of the same dimensions, vocabulary 10,000, 2 threads.
Each system runs in its own process; the allocator is named in every row. Medians.
CTranslate2 is not measured here yet (its converter needs a Marian export of the model).
"""

from __future__ import annotations

import argparse
import json
import statistics
import time

from common import SIZES, VOCAB, marian_model, measure_in_subprocess, set_up_allocator

SENTENCES, SRC_LEN, STEPS = 64, 15, 40
RUNS = [  # (system, search, allocator)
    ("aiayn", "greedy", "tuned"),
    ("aiayn", "beam5", "tuned"),
    ("aiayn", "beam5", "default"),
    ("HF Marian", "greedy", "default"),
    ("HF Marian", "beam5", "default"),
    ("no-cache loop", "greedy", "tuned"),
]


def source():
    import torch

    g = torch.Generator().manual_seed(0)
    src = torch.randint(4, VOCAB, (SENTENCES, SRC_LEN), generator=g)
    src[:, -1] = 3  # EOS
    return src


class HoldEOS:
    """Wraps a step decoder so EOS is (almost) never chosen before the forced last step."""

    def __init__(self, inner):
        self.inner = inner

    def start(self, src, beam):
        return self.inner.start(src, beam)

    def step(self, tokens, state):
        log_probs, state = self.inner.step(tokens, state)
        log_probs[:, 3] -= 1e4
        return log_probs, state

    def reorder(self, state, index):
        return self.inner.reorder(state, index)


def aiayn_runner(size: str, search: str, cached: bool):
    import torch

    from aiayn.config import ModelConfig
    from aiayn.decode import TransformerStepper, beam_search, greedy_search
    from aiayn.decode.stepper import UncachedTransformerStepper
    from aiayn.models import build_model

    s = SIZES[size]
    cfg = ModelConfig(
        d_model=s["d_model"],
        n_heads=s["n_heads"],
        d_ff=s["d_ff"],
        n_encoder_layers=s["layers"],
        n_decoder_layers=s["layers"],
    )
    model = build_model(cfg.with_vocab(VOCAB)).eval()
    stepper = HoldEOS(TransformerStepper(model) if cached else UncachedTransformerStepper(model))
    src = source()

    def run():
        with torch.inference_mode():
            if search == "greedy":
                greedy_search(stepper, src, max_len=STEPS)
            else:
                beam_search(stepper, src, beam=5, max_len_b=STEPS - SRC_LEN)

    return run


def marian_runner(size: str, search: str):
    import torch

    model = marian_model(size).eval()
    src = source()
    beams = 1 if search == "greedy" else 5

    def run():
        with torch.inference_mode():
            model.generate(
                input_ids=src,
                attention_mask=torch.ones_like(src),
                num_beams=beams,
                do_sample=False,
                min_new_tokens=STEPS,
                max_new_tokens=STEPS,
            )

    return run


def worker(system: str, size: str, search: str, repeats: int) -> dict:
    import torch

    torch.set_num_threads(2)
    torch.manual_seed(0)
    if system == "HF Marian":
        run = marian_runner(size, search)
    else:
        run = aiayn_runner(size, search, cached=system == "aiayn")
    run()  # warm-up
    times = []
    for _ in range(repeats):
        begin = time.perf_counter()
        run()
        times.append(time.perf_counter() - begin)
    return {"sentences_per_s": SENTENCES / statistics.median(times)}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--sizes", nargs="+", default=["tiny", "base"], choices=list(SIZES))
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--worker", nargs=4, metavar=("SYSTEM", "SIZE", "SEARCH", "ALLOC"))
    args = parser.parse_args()
    if args.worker:
        system, size, search, allocator = args.worker
        set_up_allocator(allocator)
        print(json.dumps(worker(system, size, search, args.repeats)))
        return
    for size in args.sizes:
        print(f"\n{size}: sentences/s, {SENTENCES} sentences, {STEPS} steps, 2 threads")
        print(f"  {'system':14} {'search':7} {'allocator':9} {'sent/s':>8} {'vs HF':>7}")
        results = {}
        for system, search, allocator in RUNS:
            if system == "no-cache loop" and size == "base":
                continue
            measured = measure_in_subprocess(
                __file__,
                [system, size, search, allocator],
                allocator,
                ["--repeats", str(args.repeats)],
            )
            if isinstance(measured, str):
                print(f"  {system:14} {search:7} {allocator:9} {'failed':>8}  ({measured})")
                continue
            value = measured["sentences_per_s"]
            results[(system, search)] = value
            hf = results.get(("HF Marian", search))
            ratio = f"{value / hf:.2f}x" if hf and system != "HF Marian" else ""
            print(f"  {system:14} {search:7} {allocator:9} {value:>8.1f} {ratio:>7}", flush=True)
        for search in ("greedy", "beam5"):
            ours, hf = results.get(("aiayn", search)), results.get(("HF Marian", search))
            if ours and hf:
                print(f"  aiayn / HF Marian, {search}: {ours / hf:.2f}x")


if __name__ == "__main__":
    main()
