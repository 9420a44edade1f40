"""Decoding speed, side by side: aiayn (KV cache), Hugging Face Marian, CTranslate2 and a
no-cache loop.

    python bench/decode.py [--sizes tiny base] [--repeats 3] [--rounds 3]

Sentences per second for greedy search and beam 5 on a batch of 64 sentences of 15 source
tokens (Multi30k length), with exactly 40 decoding steps for every system (EOS is held back
until the last step), random weights of the same dimensions, vocabulary 10,000, 2 threads.
Each system runs in its own process; the allocator is named in every row. Medians of
``--repeats`` timed runs per process, then over ``--rounds`` passes through all the rows
(on a shared machine, a slow spell then falls on every system alike).
"aiayn bf16" decodes under bfloat16 autocast (``aiayn translate --precision bf16``).
CTranslate2 (``pip install ctranslate2``) decodes aiayn's own weights, exported by
``ct2_export.py``; its greedy output is checked against aiayn's, token for token. Its process
never imports torch.
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from pathlib import Path

from common import SIZES, VOCAB, aiayn_config, marian_model, measure_in_subprocess, set_up_allocator

SENTENCES, SRC_LEN, STEPS = 64, 15, 40
RUNS = [  # (system, search, allocator)
    ("aiayn", "greedy", "tuned"),
    ("aiayn", "beam5", "tuned"),
    ("aiayn", "beam5", "default"),
    ("aiayn bf16", "greedy", "tuned"),
    ("aiayn bf16", "beam5", "tuned"),
    ("HF Marian", "greedy", "default"),
    ("HF Marian", "beam5", "default"),
    ("CTranslate2 float32", "greedy", "default"),
    ("CTranslate2 float32", "beam5", "default"),
    ("CTranslate2 int8", "greedy", "default"),
    ("CTranslate2 int8", "beam5", "default"),
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

    def start(self, src):
        return self.inner.start(src)

    def step(self, tokens, state):
        log_probs, state = self.inner.step(tokens, state)
        log_probs[:, 3] -= 1e4
        return log_probs, state

    def reorder(self, state, index, *, sentences=None):
        return self.inner.reorder(state, index, sentences=sentences)


def aiayn_model(size: str):
    """The random-weight model every aiayn row and the CTranslate2 export use (seed 0)."""
    import torch

    from aiayn.models import build_model

    torch.manual_seed(0)
    return build_model(aiayn_config(size)).eval()


def aiayn_runner(size: str, search: str, cached: bool, bf16: bool = False):
    import torch

    from aiayn.decode import beam_search, greedy_search, stepper_for
    from aiayn.decode.stepper import UncachedTransformerStepper

    model = aiayn_model(size)
    stepper = HoldEOS(stepper_for(model) if cached else UncachedTransformerStepper(model))
    src = source()

    def run():
        with torch.inference_mode(), torch.autocast("cpu", torch.bfloat16, enabled=bf16):
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


def export_for_ct2(size: str, directory: str) -> dict:
    """Export the aiayn model to ``directory``, with the source batch and aiayn's greedy output."""
    import torch
    from ct2_export import export

    from aiayn.decode import greedy_search, stepper_for

    torch.set_num_threads(2)
    model = aiayn_model(size)
    export(model, directory)
    src = source()
    with torch.inference_mode():
        out = greedy_search(HoldEOS(stepper_for(model)), src, max_len=STEPS)  # (B, T)
    reference = {"source": src.tolist(), "aiayn_greedy": out[:, : STEPS - 1].tolist()}
    Path(directory, "reference.json").write_text(json.dumps(reference))
    return {"exported": directory}


def ct2_runner(search: str, compute_type: str, directory: str):
    """CTranslate2 on the exported model; returns the run and a check of its greedy output."""
    import ctranslate2
    from ct2_export import vocab_tokens

    reference = json.loads(Path(directory, "reference.json").read_text())
    vocab = vocab_tokens(VOCAB)
    batch = [[vocab[i] for i in row] for row in reference["source"]]
    translator = ctranslate2.Translator(
        directory, device="cpu", compute_type=compute_type, inter_threads=1, intra_threads=2
    )
    options = dict(
        beam_size=1 if search == "greedy" else 5,
        min_decoding_length=STEPS,
        max_decoding_length=STEPS,
        max_batch_size=SENTENCES,
    )

    def run():
        return translator.translate_batch(batch, **options)

    def agreement() -> float:
        """The share of sentences whose first STEPS - 1 tokens equal aiayn's greedy ones."""
        results = translator.translate_batch(batch, **{**options, "beam_size": 1})
        ours = [[vocab[i] for i in row] for row in reference["aiayn_greedy"]]
        same = [r.hypotheses[0][: STEPS - 1] == o for r, o in zip(results, ours, strict=True)]
        return sum(same) / len(same)

    return run, agreement


def worker(system: str, size: str, search: str, repeats: int, ct2_dir: str | None) -> dict:
    extra = {}
    if system.startswith("CTranslate2"):
        run, agreement = ct2_runner(search, system.split()[1], ct2_dir)
        if search == "greedy":
            extra["same_as_aiayn"] = agreement()
    else:
        import torch

        torch.set_num_threads(2)
        if system == "HF Marian":
            torch.manual_seed(0)
            run = marian_runner(size, search)
        else:
            run = aiayn_runner(
                size, search, cached=system != "no-cache loop", bf16=system == "aiayn bf16"
            )
    run()  # warm-up
    times = []
    for _ in range(repeats):
        begin = time.perf_counter()
        run()
        times.append(time.perf_counter() - begin)
    return {"sentences_per_s": SENTENCES / statistics.median(times), **extra}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--sizes", nargs="+", default=["tiny", "base"], choices=SIZES)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--rounds", type=int, default=1, help="passes over all the rows")
    parser.add_argument("--worker", nargs=4, metavar=("SYSTEM", "SIZE", "SEARCH", "ALLOC"))
    parser.add_argument("--export", nargs=2, metavar=("SIZE", "DIR"))
    parser.add_argument("--ct2-dir")
    args = parser.parse_args()
    if args.export:
        print(json.dumps(export_for_ct2(*args.export)))
    elif args.worker:
        system, size, search, allocator = args.worker
        set_up_allocator(allocator)
        print(json.dumps(worker(system, size, search, args.repeats, args.ct2_dir)))
    else:
        for size in args.sizes:
            with tempfile.TemporaryDirectory() as ct2_dir:
                bench_size(size, args.repeats, args.rounds, ct2_dir)


def bench_size(size: str, repeats: int, rounds: int, ct2_dir: str) -> None:
    """Every row once per round, so that a slow spell of a shared machine falls on all
    systems alike; each row's figure is the median over rounds."""
    print(f"\n{size}: sentences/s, {SENTENCES} sentences, {STEPS} steps, 2 threads, medians")
    exported = measure_in_subprocess(__file__, [], "tuned", ["--export", size, ct2_dir])
    if isinstance(exported, str):
        print(f"  CTranslate2 export failed: {exported}")
    rows = [
        row
        for row in RUNS
        if not (row[0] == "no-cache loop" and size == "base")
        and not (row[0].startswith("CTranslate2") and isinstance(exported, str))
    ]
    measured: dict[tuple[str, str, str], list[dict] | str] = {row: [] for row in rows}
    for _ in range(rounds):
        for row in rows:
            system, search, allocator = row
            result = measure_in_subprocess(
                __file__,
                [system, size, search, allocator],
                allocator,
                ["--repeats", str(repeats), "--ct2-dir", ct2_dir],
            )
            if isinstance(result, str):
                measured[row] = result
            elif isinstance(measured[row], list):
                measured[row].append(result)
    print(f"  {'system':20} {'search':7} {'allocator':9} {'sent/s':>8}")
    results = {}
    for (system, search, allocator), runs in measured.items():
        if isinstance(runs, str):
            print(f"  {system:20} {search:7} {allocator:9} {'failed':>8}  ({runs})")
            continue
        value = statistics.median(r["sentences_per_s"] for r in runs)
        results.setdefault((system, search), value)
        check = runs[0].get("same_as_aiayn")
        note = f"  greedy output equal to aiayn's: {check:.0%} of sentences" if check else ""
        print(f"  {system:20} {search:7} {allocator:9} {value:>8.1f}{note}", flush=True)
    for search in ("greedy", "beam5"):
        for ours_name in ("aiayn", "aiayn bf16"):
            ours = results.get((ours_name, search))
            for peer in ("HF Marian", "CTranslate2 float32", "CTranslate2 int8"):
                theirs = results.get((peer, search))
                if ours and theirs:
                    print(f"  {ours_name} / {peer}, {search}: {ours / theirs:.2f}x")


if __name__ == "__main__":
    main()
