"""Decoding speed on a GPU, side by side: aiayn, Hugging Face ``generate`` and CTranslate2,
all three on the very same weights.

    python bench/gpu_decode.py [--sizes base big] [--batches 64 1024] [--repeats 2]

(``--device cpu --sizes tiny --batches 8`` checks the script itself on a machine without a GPU.)

Sentences per second of greedy search and beam search (beam 5) over batches of 64 and
1,024 sentences of WMT length: 27 source tokens, and exactly 28 decoding steps for every
system (EOS held back until the last step), vocabulary 32,000. The weights are a random
aiayn model of the ``base`` or ``big`` preset (seed 0); Hugging Face decodes them as the
``MarianMTModel`` that ``aiayn export hf`` writes (``aiayn.interop.hf``), CTranslate2 as
the model ``aiayn export ct2`` writes (``aiayn.interop.ct2``).

- aiayn: ``fp32`` and ``bf16`` (``--precision bf16``: bfloat16 autocast), through the
  stepper ``aiayn translate`` uses (``stepper_for``);
- Hugging Face: ``generate`` in float32 and in bfloat16 (the model cast);
- CTranslate2: ``float32``, ``float16``, ``bfloat16`` and ``int8_float16``.

Each system runs in its own process (CTranslate2's imports no torch); each figure is the
median of ``--repeats`` timed calls after a warm-up call. Every row also gives the share of
the 64 greedy sentences whose tokens equal aiayn fp32's (random weights give flat
distributions, so half-precision rows can drift from it without being wrong).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

from common import measure_in_subprocess
from decode import HoldEOS

SRC_LEN, STEPS, VOCAB, BEAM = 27, 28, 32_000, 5
SIZES = ("tiny", "base", "big")
SYSTEMS = {
    "aiayn": ("fp32", "bf16"),
    "HF generate": ("fp32", "bf16"),
    "CTranslate2": ("float32", "float16", "bfloat16", "int8_float16"),
}
SEARCHES = ("greedy", f"beam{BEAM}")
CHECKED = 64  # sentences whose greedy output is compared with aiayn fp32's


def source(batch: int):
    """(batch, SRC_LEN) source ids ending in EOS (3), avoiding the special ids 0-3."""
    import torch

    g = torch.Generator().manual_seed(batch)
    src = torch.randint(4, VOCAB, (batch, SRC_LEN), generator=g)
    src[:, -1] = 3
    return src


def model_config(size: str):
    from aiayn.config import model_preset

    return model_preset(size, dropout=0.1).with_vocab(VOCAB)


def aiayn_model(size: str):
    import torch

    from aiayn.models import build_model

    torch.manual_seed(0)
    return build_model(model_config(size)).eval()


def names() -> list[str]:
    """CTranslate2's token names: aiayn's special ids 0-3 under its names, then t4, t5, ..."""
    return ["<blank>", "<unk>", "<s>", "</s>"] + [f"t{i}" for i in range(4, VOCAB)]


def prepare(size: str, work: Path, device: str) -> dict:
    """The CTranslate2 conversion of the random model, and aiayn fp32's greedy output on
    the checked sentences (what every row is compared with)."""

    from aiayn.interop.ct2 import convert

    model = aiayn_model(size)
    convert(model, names(), names(), str(work / f"ct2-{size}"))
    runner = aiayn_runner(model.to(device), "fp32", "greedy", source(CHECKED))
    (work / f"greedy-{size}.json").write_text(json.dumps(runner()))
    return {"prepared": size}


def aiayn_runner(model, precision: str, search: str, src):
    """A call decoding ``src`` with aiayn; it returns the greedy tokens (beam: nothing)."""
    import torch

    from aiayn.decode import beam_search, greedy_search, stepper_for

    stepper = HoldEOS(stepper_for(model, precision=precision), model.specials.eos)
    src = src.to(next(model.parameters()).device)

    def run():
        with torch.inference_mode():
            if search == "greedy":
                out = greedy_search(
                    stepper,
                    src,
                    max_len=STEPS,
                    specials=model.specials,
                    argmax=model.profile.argmax,
                )
                return out[:, : STEPS - 1].tolist()
            beam_search(
                stepper,
                src,
                beam=BEAM,
                max_len_b=STEPS - SRC_LEN,
                specials=model.specials,
                extensions=model.profile.extensions,
            )
            if src.is_cuda:
                torch.cuda.synchronize()
            return None

    return run


def hf_model(size: str, precision: str, device: str):
    """The Marian model ``aiayn export hf`` makes of the random aiayn model."""
    import torch
    from transformers import MarianConfig, MarianMTModel

    from aiayn.interop.hf import marian_config, marian_weights

    cfg = model_config(size)
    model = MarianMTModel(MarianConfig(**marian_config(cfg)))
    weights = marian_weights(aiayn_model(size).state_dict(), cfg)
    missing, unexpected = model.load_state_dict(weights, strict=False)
    assert not unexpected and all("embed_positions" in k for k in missing), (missing, unexpected)
    dtype = torch.bfloat16 if precision == "bf16" else torch.float32
    return model.to(device, dtype).eval()


def hf_runner(model, search: str, src):
    import torch

    src = src.to(model.device)

    def run():
        with torch.inference_mode():
            out = model.generate(
                input_ids=src,
                attention_mask=torch.ones_like(src),
                num_beams=1 if search == "greedy" else BEAM,
                do_sample=False,
                min_new_tokens=STEPS,
                max_new_tokens=STEPS,
                length_penalty=0.6,
            )
        # (B, 1 + STEPS): the decoder's start token first
        return out[:, 1:STEPS].tolist() if search == "greedy" else None

    return run


def ct2_runner(translator, search: str, src):
    vocab = names()
    batch = [[vocab[i] for i in row] for row in src[:, :-1].tolist()]  # CTranslate2 adds EOS
    index = {t: i for i, t in enumerate(vocab)}

    def run():
        results = translator.translate_batch(
            batch,
            beam_size=1 if search == "greedy" else BEAM,
            min_decoding_length=STEPS,
            max_decoding_length=STEPS,
            max_batch_size=len(batch),
            length_penalty=0.6,
        )
        if search != "greedy":
            return None
        return [[index[t] for t in r.hypotheses[0][: STEPS - 1]] for r in results]

    return run


def timed(run, repeats: int) -> tuple[float, object]:
    """The median seconds of ``repeats`` calls after a warm-up call, and the first result."""
    result = run()
    times = []
    for _ in range(repeats):
        begin = time.perf_counter()
        run()
        times.append(time.perf_counter() - begin)
    return statistics.median(times), result


def worker(system: str, size: str, args) -> list[dict]:
    """Every precision, batch size and search of ``system``: one row each."""
    import torch  # CTranslate2's worker imports it only for the random source ids

    work, device = Path(args.work), args.device
    reference = json.loads((work / f"greedy-{size}.json").read_text())
    rows = []
    for precision in SYSTEMS[system]:
        if system == "CTranslate2":
            import ctranslate2

            model = ctranslate2.Translator(
                str(work / f"ct2-{size}"), device=device, compute_type=precision
            )
        elif system == "HF generate":
            model = hf_model(size, precision, device)
        else:
            model = aiayn_model(size).to(device)
        for batch in args.batches:
            for search in SEARCHES:
                src = source(batch)
                if system == "CTranslate2":
                    run = ct2_runner(model, search, src)
                elif system == "HF generate":
                    run = hf_runner(model, search, src)
                else:
                    run = aiayn_runner(model, precision, search, src)
                seconds, out = timed(run, args.repeats)
                row = {"precision": precision, "batch": batch, "search": search}
                row["sentences_per_s"] = batch / seconds
                if out is not None and batch == CHECKED:
                    same = [a == b for a, b in zip(out, reference, strict=True)]
                    row["same_as_aiayn_fp32"] = sum(same) / len(same)
                rows.append(row)
                print(json.dumps(row), file=sys.stderr, flush=True)
        del model
        if device == "cuda":
            torch.cuda.empty_cache()
    return rows


def report(size: str, results: dict[str, list[dict] | str]) -> None:
    print(f"\n{size}: sentences/s, {SRC_LEN}-token sources, {STEPS} steps, vocabulary {VOCAB:,}")
    print(f"  {'system':14} {'precision':13} {'batch':>5} {'search':7} {'sent/s':>9} same")
    best: dict[tuple[str, int, str], float] = {}
    for system, rows in results.items():
        if isinstance(rows, str):
            print(f"  {system:14} failed: {rows}")
            continue
        for r in rows:
            same = r.get("same_as_aiayn_fp32")
            same_text = "" if same is None else f"{same:.0%}"
            print(
                f"  {system:14} {r['precision']:13} {r['batch']:>5} {r['search']:7} "
                f"{r['sentences_per_s']:>9,.0f} {same_text}"
            )
            key = (system, r["batch"], r["search"])
            best[key] = max(best.get(key, 0.0), r["sentences_per_s"])
    for batch in sorted({b for _, b, _ in best}):
        for search in SEARCHES:
            ours = best.get(("aiayn", batch, search))
            for peer in ("HF generate", "CTranslate2"):
                theirs = best.get((peer, batch, search))
                if ours and theirs:
                    print(
                        f"  fastest aiayn / fastest {peer}, batch {batch}, {search}: "
                        f"{ours / theirs:.2f}x"
                    )


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--device", default="cuda", choices=["cuda", "cpu"])
    parser.add_argument("--sizes", nargs="+", default=["base", "big"], choices=SIZES)
    parser.add_argument("--batches", nargs="+", type=int, default=[64, 1024])
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--systems", nargs="+", default=list(SYSTEMS), choices=list(SYSTEMS))
    parser.add_argument("--worker", nargs=2, metavar=("SYSTEM", "SIZE"))
    parser.add_argument("--prepare", metavar="SIZE")
    parser.add_argument("--work")
    args = parser.parse_args()
    if args.prepare:
        print(json.dumps(prepare(args.prepare, Path(args.work), args.device)))
    elif args.worker:
        print(json.dumps(worker(*args.worker, args)))
    else:
        for size in args.sizes:
            with tempfile.TemporaryDirectory() as work:
                bench_size(size, args, work)


def bench_size(size: str, args, work: str) -> None:
    options = ["--work", work, "--device", args.device, "--repeats", str(args.repeats)]
    options.append("--batches")
    options += [str(b) for b in args.batches]
    prepare_options = ["--prepare", size, "--work", work, "--device", args.device]
    prepared = measure_in_subprocess(__file__, [], "default", prepare_options)
    if isinstance(prepared, str):
        print(f"\n{size}: preparation failed: {prepared}")
        return
    results = {
        system: measure_in_subprocess(__file__, [system, size], "default", options)
        for system in args.systems
    }
    report(size, results)


if __name__ == "__main__":
    main()
