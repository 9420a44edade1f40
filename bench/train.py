"""Training-step throughput, side by side: aiayn vs torch.nn.Transformer vs HF Marian.

    python bench/train.py [--sizes tiny base] [--steps 8] [--precisions fp32 bf16] [--isa avx2]
    python bench/train.py --isa avx2 --sizes tiny --precisions fp32 --compiled aiayn
    python bench/train.py --device cuda [--sizes base big] [--pairs 1700]
    python bench/train.py --device cuda --shape wmt [--compiled aiayn nn.Transformer]

Target tokens per second of a full training step (forward, backward, Adam step) on batches
shaped like Multi30k (146 sentence pairs of 12-16 tokens, ~2.1k target tokens, vocabulary
10,000), at the same dimensions for every system. Each measurement runs in its own process,
so that allocator settings cannot leak from one system to another; the allocator is named
in every row. "default" is glibc malloc as it comes; "tuned" is what aiayn sets up itself
(mallopt: no mmap, no trim). Medians over the timed steps. ``--precisions`` picks the rows'
precisions (default on the CPU: those it computes in hardware; bf16 is left out where it is
emulated: neither AVX512-BF16 nor AMX); the first line names the CPU and its instruction set.
``--isa avx2`` holds every row, in every process, to AVX2 by each library's own switch
(``common.ISAS``) and names in the header what each library then runs.

On a GPU (``--device cuda``) every system trains in bfloat16 autocast, the batch has
``--pairs`` sentence pairs of the same shape (1,700: ~25k target tokens, the paper's batch
of §5.1), and each row also gives its model FLOP utilisation: 6 × the parameters a token
passes through (embeddings as the output projection) × tokens, per second, against the
GPU's dense bfloat16 peak (``--peak-tflops``; 989 for an H100 SXM).

``--shape wmt`` makes the batches WMT-like instead: sentences of 20-34 tokens (27 on
average, both sides), ~25,000 target tokens a batch (§5.1), vocabulary 37,000 (the WMT14
recipe's). ``--compiled SYSTEM ...`` adds a row for each system named, its model (aiayn: its
loss module, as ``run.compile`` does) under ``torch.compile(dynamic=True)``, on a CPU in
each of the precisions its eager rows run. ``--trace FILE``
adds the 30 costliest operators of a few steps of each row (``torch.profiler``) to FILE.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time

from common import (
    ISAS,
    VOCAB,
    aiayn_config,
    hold_to_isa,
    instruction_set,
    marian_model,
    measure_in_subprocess,
    native_precisions,
    set_up_allocator,
)
from common import SIZES as CPU_SIZES

SIZES = (*CPU_SIZES, "big")  # big only makes sense on a GPU
PAIRS = 146  # sentence pairs per batch: ~2.1k target tokens, a Multi30k batch
RUNS = [  # (system, precision, allocator)
    ("aiayn", "fp32", "tuned"),
    ("aiayn", "bf16", "tuned"),
    ("aiayn", "bf16", "default"),
    ("nn.Transformer", "fp32", "default"),
    ("nn.Transformer", "bf16", "default"),
    ("nn.Transformer", "bf16", "tuned"),
    ("HF Marian", "fp32", "default"),
]
PRECISIONS = ("fp32", "bf16")
GPU_SYSTEMS = ("aiayn", "nn.Transformer", "HF Marian")
COMPILED = " compiled"  # a system name with this suffix: its model under torch.compile
SHAPES = {  # sentence lengths (lowest, highest + 1), vocabulary, target tokens a GPU batch
    "multi30k": ((12, 17), VOCAB, None),
    "wmt": ((20, 35), 37_000, 25_000),
}


def batch(n: int, shape: str, seed: int = 0):
    import torch

    (low, high), vocab, _ = SHAPES[shape]
    g = torch.Generator().manual_seed(seed)
    src_len = torch.randint(low, high, (n,), generator=g)
    tgt_len = torch.randint(low, high, (n,), generator=g)
    src = torch.zeros(n, high, dtype=torch.long)
    tgt = torch.zeros(n, high + 1, dtype=torch.long)
    for i in range(n):
        src[i, : src_len[i]] = torch.randint(4, vocab, (int(src_len[i]),), generator=g)
        src[i, src_len[i]] = 3
        tgt[i, 0] = 2
        tgt[i, 1 : tgt_len[i] + 1] = torch.randint(4, vocab, (int(tgt_len[i]),), generator=g)
        tgt[i, tgt_len[i] + 1] = 3
    return src, tgt[:, :-1], tgt[:, 1:]


def compiled(module, system: str):
    """``module`` under ``torch.compile`` as ``run.compile`` does, if ``system`` asks."""
    import torch

    return torch.compile(module, dynamic=True) if system.endswith(COMPILED) else module


def aiayn_step(size, vocab, system):
    from aiayn.models import build_model
    from aiayn.train.tasks import TranslationLoss

    model = build_model(aiayn_config(size, vocab=vocab))
    loss_module = compiled(TranslationLoss(model, epsilon=0.1), system)

    def loss(src, tgt_in, tgt_out):
        value, _ = loss_module(src, tgt_in, tgt_out)
        return value / (tgt_out != 0).sum()

    return model, loss


def torch_step(size, vocab, system):
    import torch
    import torch.nn.functional as F
    from torch import nn

    s = aiayn_config(size)

    class Model(nn.Module):
        def __init__(self):
            super().__init__()
            self.embed = nn.Embedding(vocab, s.d_model, padding_idx=0)
            self.pos = nn.Parameter(torch.randn(64, s.d_model) * 0.02)
            self.core = nn.Transformer(
                s.d_model,
                s.n_heads,
                s.n_encoder_layers,
                s.n_decoder_layers,
                s.d_ff,
                dropout=0.1,
                batch_first=True,
            )
            self.out = nn.Linear(s.d_model, vocab, bias=False)
            self.out.weight = self.embed.weight

        def forward(self, src, tgt):
            scale = s.d_model**0.5
            x = self.embed(src) * scale + self.pos[: src.size(1)]
            y = self.embed(tgt) * scale + self.pos[: tgt.size(1)]
            causal = nn.Transformer.generate_square_subsequent_mask(tgt.size(1), device=tgt.device)
            h = self.core(
                x,
                y,
                tgt_mask=causal,
                src_key_padding_mask=src == 0,
                tgt_key_padding_mask=tgt == 0,
                memory_key_padding_mask=src == 0,
                tgt_is_causal=True,
            )
            return self.out(h)

    model = Model()
    forward = compiled(model, system)

    def loss(src, tgt_in, tgt_out):
        logits = forward(src, tgt_in)
        return F.cross_entropy(
            logits.flatten(0, 1), tgt_out.flatten(), ignore_index=0, label_smoothing=0.1
        )

    return model, loss


def marian_step(size, vocab, system):
    model = marian_model(size, vocab=vocab)
    forward = compiled(model, system)

    def loss(src, tgt_in, tgt_out):
        import torch.nn.functional as F

        logits = forward(
            input_ids=src,
            attention_mask=src != 0,
            decoder_input_ids=tgt_in,
            decoder_attention_mask=tgt_in != 0,
        ).logits
        return F.cross_entropy(
            logits.flatten(0, 1), tgt_out.flatten(), ignore_index=0, label_smoothing=0.1
        )

    return model, loss


BUILDERS = {"aiayn": aiayn_step, "nn.Transformer": torch_step, "HF Marian": marian_step}


def training_step(system: str, size: str, precision: str, device: str, pairs: int, shape: str):
    """A function that makes one full training step (forward, under bfloat16 autocast for
    ``bf16``; backward; Adam) of ``system`` on a fixed batch, and that batch."""
    import torch

    if device == "cpu":
        torch.set_num_threads(2)
    torch.manual_seed(0)
    vocab = SHAPES[shape][1]
    model, loss_fn = BUILDERS[system.removesuffix(COMPILED)](size, vocab, system)
    model.to(device)
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-4, betas=(0.9, 0.98), eps=1e-9)
    src, tgt_in, tgt_out = (t.to(device) for t in batch(pairs, shape))
    device_type = torch.device(device).type

    def step() -> None:
        with torch.autocast(device_type, dtype=torch.bfloat16, enabled=precision == "bf16"):
            loss = loss_fn(src, tgt_in, tgt_out)
        loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)

    return step, (src, tgt_in, tgt_out)


def worker(system: str, size: str, precision: str, steps: int, args) -> dict:
    device, shape = args.device, args.shape
    step_once, (src, _, tgt_out) = training_step(system, size, precision, device, args.pairs, shape)
    tokens = int((tgt_out != 0).sum())
    times = []
    for step in range(steps + 2):  # two warm-up steps
        _synchronize(device)
        begin = time.perf_counter()
        step_once()
        _synchronize(device)
        if step >= 2:
            times.append(time.perf_counter() - begin)
    if args.trace:
        _trace(step_once, device, args.trace, f"{system}, {size}, {precision}")
    flops = 6 * (
        _flop_params(size, "encoder", shape) * int((src != 0).sum())
        + _flop_params(size, "decoder", shape) * tokens
    )
    return {
        "tokens_per_s": tokens / statistics.median(times),
        "tokens": tokens,
        "flops_per_step": flops,
        "step_s": statistics.median(times),
    }


def _synchronize(device: str) -> None:
    import torch

    if torch.device(device).type == "cuda":
        torch.cuda.synchronize(device)


def _trace(step_once, device: str, path: str, title: str) -> None:
    """The 30 operators that cost most over three steps, by device time, added to ``path``."""
    import torch
    from torch.profiler import ProfilerActivity, profile

    activities = [ProfilerActivity.CPU]
    if torch.device(device).type == "cuda":
        activities.append(ProfilerActivity.CUDA)
    with profile(activities=activities) as prof:
        for _ in range(3):
            step_once()
        _synchronize(device)
    key = "self_cuda_time_total" if len(activities) > 1 else "self_cpu_time_total"
    with open(path, "a") as f:
        f.write(f"\n{title}\n")
        f.write(prof.key_averages().table(sort_by=key, row_limit=30, max_name_column_width=60))


def _flop_params(size: str, side: str, shape: str) -> int:
    """Weights a token of ``side`` is multiplied by (twice per weight forward, four times
    backward): its layers' projections, and on the decoder side the output projection."""
    s = aiayn_config(size)
    attention = 4 * s.d_model * s.d_model
    ffn = 2 * s.d_model * s.d_ff
    if side == "encoder":
        return s.n_encoder_layers * (attention + ffn)
    return s.n_decoder_layers * (2 * attention + ffn) + s.d_model * SHAPES[shape][1]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument(
        "--sizes", nargs="+", choices=SIZES, help="default: tiny base (CPU), base big (GPU)"
    )
    parser.add_argument("--steps", type=int, default=8)
    parser.add_argument("--device", default="cpu", help="cpu, or cuda / cuda:N")
    parser.add_argument("--shape", choices=list(SHAPES), default="multi30k")
    parser.add_argument(
        "--pairs",
        type=int,
        help="sentence pairs per batch (default: 146 on the CPU; on a GPU 1,700, or ~25k "
        "target tokens with --shape wmt)",
    )
    parser.add_argument(
        "--systems", nargs="*", default=list(GPU_SYSTEMS), choices=GPU_SYSTEMS, help="GPU rows"
    )
    parser.add_argument(
        "--compiled",
        nargs="*",
        default=[],
        choices=GPU_SYSTEMS,
        help="systems to add a torch.compile row for (GPU: bf16; CPU: each precision)",
    )
    parser.add_argument("--trace", help="a file each row's costliest operators are added to")
    parser.add_argument(
        "--peak-tflops", type=float, default=989.0, help="the GPU's dense bf16 peak"
    )
    parser.add_argument(
        "--precisions",
        nargs="+",
        choices=PRECISIONS,
        help="the rows' precisions (default on the CPU: those it computes in hardware)",
    )
    parser.add_argument(
        "--isa",
        choices=list(ISAS),
        default="native",
        help="hold every system to this instruction set (avx2: an AVX2 machine emulated)",
    )
    parser.add_argument("--worker", nargs=4, metavar=("SYSTEM", "SIZE", "PRECISION", "ALLOC"))
    args = parser.parse_args()
    args.pairs = args.pairs or default_pairs(args.shape, gpu=args.device != "cpu")
    if args.worker:
        system, size, precision, allocator = args.worker
        set_up_allocator(allocator)
        print(json.dumps(worker(system, size, precision, args.steps, args)))
        return
    gpu = args.device != "cpu"
    held = hold_to_isa(args.isa)  # before this process imports torch
    print(instruction_set(), *held, sep="\n", flush=True)
    native = native_precisions(PRECISIONS, args.isa)
    args.precisions = args.precisions or (PRECISIONS if gpu else native)
    for size in args.sizes or (["base", "big"] if gpu else ["tiny", "base"]):
        bench_size(size, args)


def default_pairs(shape: str, *, gpu: bool) -> int:
    (low, high), _, gpu_tokens = SHAPES[shape]
    if not gpu:
        return PAIRS
    return gpu_tokens * 2 // (low + high - 1) if gpu_tokens else 1700


def bench_size(size: str, args) -> None:
    gpu = args.device != "cpu"
    steps = args.steps if size == "tiny" or gpu else max(3, args.steps // 2)
    options = ["--steps", str(steps), "--device", args.device, "--pairs", str(args.pairs)]
    options += ["--shape", args.shape] + (["--trace", args.trace] if args.trace else [])
    where = args.device if gpu else "2 threads"
    print(f"\n{size}: target tokens/s of a training step ", end="")
    print(f"(median of {steps}, {where}, {args.pairs} pairs of {args.shape} length)")
    versus = "vs nn.T" if gpu else "vs nn.T fp32"
    header = f"  {'system':24} {'precision':9} {'allocator':9} {'tok/s':>9} {versus:>12}"
    print(f"{header} MFU" if gpu else header)
    runs = RUNS + [(s + COMPILED, p, a) for s, p, a in RUNS if s in args.compiled]
    if gpu:
        systems = [*args.systems, *(s + COMPILED for s in args.compiled)]
        runs = [(system, "bf16", "default") for system in systems]
    runs = [run for run in runs if run[1] in args.precisions]
    results = {}
    for system, precision, allocator in runs:
        measured = measure_in_subprocess(
            __file__, [system, size, precision, allocator], allocator, options
        )
        if isinstance(measured, str):
            print(f"  {system:24} {precision:9} {allocator:9} {'failed':>9}  ({measured})")
            continue
        results[(system, precision, allocator)] = measured["tokens_per_s"]
        base = results.get(("nn.Transformer", "bf16" if gpu else "fp32", "default"))
        value = results[(system, precision, allocator)]
        ratio = f"{value / base:.2f}x" if base else ""
        mfu = measured["flops_per_step"] / measured["step_s"] / (args.peak_tflops * 1e12)
        row = f"  {system:24} {precision:9} {allocator:9} {value:>9,.0f} {ratio:>12}"
        print(f"{row} {mfu:.1%}" if gpu else row, flush=True)
    if gpu:
        _gpu_summary(results)
    else:
        _summary(results)


def _summary(results: dict) -> None:
    ours = results.get(("aiayn", "bf16", "tuned"))
    ref = results.get(("nn.Transformer", "fp32", "default"))
    like = results.get(("nn.Transformer", "bf16", "tuned"))
    if ours and ref:
        print(
            f"  out of the box (aiayn bf16 + its allocator vs nn.Transformer fp32, glibc): "
            f"{ours / ref:.2f}x"
        )
    if ours and like:
        print(f"  like for like (both bf16, both tuned allocator): {ours / like:.2f}x")


def _gpu_summary(results: dict) -> None:
    for suffix in ("", COMPILED):
        ours = results.get(("aiayn" + suffix, "bf16", "default"))
        theirs = results.get(("nn.Transformer" + suffix, "bf16", "default"))
        if ours and theirs:
            print(f"  like for like{suffix} (both bf16 autocast, same batch): {ours / theirs:.2f}x")


if __name__ == "__main__":
    main()
