"""What the benchmarks share: model sizes, and running one measurement in its own process."""

from __future__ import annotations

import json
import os
import platform
import subprocess
import sys
from pathlib import Path

SIZES = ("tiny", "base")  # aiayn's model presets (aiayn.config.MODEL_PRESETS)
VOCAB = 10_000
# the x86 extensions that decide which precision is fast: (name printed, /proc/cpuinfo flag)
EXTENSIONS = (
    ("AVX2", "avx2"),
    ("AVX512", "avx512f"),
    ("AVX512-VNNI", "avx512_vnni"),
    ("AVX-VNNI", "avx_vnni"),
    ("AVX512-BF16", "avx512_bf16"),
    ("AMX", "amx_tile"),
)
BFLOAT16_FLAGS = {"avx512_bf16", "amx_tile"}  # bfloat16 products in hardware (else emulated)


def cpu_flags() -> set[str]:
    """The instruction-set flags of this CPU (/proc/cpuinfo; empty where there is none)."""
    try:
        text = Path("/proc/cpuinfo").read_text()
    except OSError:
        return set()
    for line in text.splitlines():
        if line.startswith("flags"):
            return set(line.split(":", 1)[1].split())
    return set()


def cpu_model() -> str:
    """This CPU's model name (/proc/cpuinfo), else what ``platform`` knows."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def instruction_set() -> str:
    """One line naming the CPU, its cores, the extensions of ``EXTENSIONS`` it has and
    lacks, and the kernels PyTorch picked (``torch.backends.cpu.get_cpu_capability``)."""
    import torch

    flags = cpu_flags()
    has = [name for name, flag in EXTENSIONS if flag in flags]
    lacks = [name for name, flag in EXTENSIONS if flag not in flags]
    return (
        f"CPU: {cpu_model()}, {os.cpu_count()} cores; has {', '.join(has) or 'none of'}"
        f"{'; lacks ' + ', '.join(lacks) if lacks else ''}; "
        f"PyTorch's kernels: {torch.backends.cpu.get_cpu_capability()}"
    )


def native_precisions(precisions: tuple[str, ...]) -> list[str]:
    """``precisions`` less bf16 where this CPU emulates bfloat16 (neither AVX512-BF16 nor
    AMX): the default of ``--precisions``."""
    emulated = not BFLOAT16_FLAGS & cpu_flags()
    return [p for p in precisions if not (p == "bf16" and emulated)]


def measure_in_subprocess(
    script: str, worker_args: list[str], allocator: str, options: list[str]
) -> dict | str:
    """Run ``script OPTIONS --worker WORKER_ARGS`` (no ``--worker`` when WORKER_ARGS is
    empty) with the allocator set up as asked; its JSON result, or the last line of its
    error output."""
    env = {**os.environ, "AIAYN_MALLOC": allocator}
    worker = ["--worker", *worker_args] if worker_args else []
    proc = subprocess.run(
        [sys.executable, script, *options, *worker],
        capture_output=True,
        text=True,
        env=env,
    )
    if proc.returncode != 0:
        return proc.stderr.strip().splitlines()[-1] if proc.stderr.strip() else "failed"
    return json.loads(proc.stdout)


def set_up_allocator(allocator: str) -> None:
    """ "tuned": what aiayn does itself (mallopt); "default": glibc as it comes."""
    if allocator == "tuned":
        from aiayn.memory import tune_allocator

        tune_allocator()


def aiayn_config(size: str, *, vocab: int = VOCAB, **overrides):
    """aiayn's ModelConfig of preset ``size``, dropout 0.1 unless overridden."""
    from aiayn.config import model_preset

    return model_preset(size, **{"dropout": 0.1, **overrides}).with_vocab(vocab)


def marian_model(size: str, *, dropout: float = 0.1, vocab: int = VOCAB):
    """A Hugging Face MarianMTModel with aiayn's dimensions and special ids (random weights)."""
    from transformers import MarianConfig, MarianMTModel

    s = aiayn_config(size)
    cfg = MarianConfig(
        vocab_size=vocab,
        d_model=s.d_model,
        encoder_layers=s.n_encoder_layers,
        decoder_layers=s.n_decoder_layers,
        encoder_attention_heads=s.n_heads,
        decoder_attention_heads=s.n_heads,
        encoder_ffn_dim=s.d_ff,
        decoder_ffn_dim=s.d_ff,
        max_position_embeddings=128,
        pad_token_id=0,
        decoder_start_token_id=2,
        eos_token_id=3,
        dropout=dropout,
        activation_function="relu",
    )
    return MarianMTModel(cfg)


def tree_rss(pid: int) -> int:
    """Resident memory of ``pid`` and all its descendants, bytes."""
    total = 0
    for p in [pid, *descendants(pid)]:
        try:
            for line in Path(f"/proc/{p}/status").read_text().splitlines():
                if line.startswith("VmRSS:"):
                    total += int(line.split()[1]) * 1024
        except OSError:
            pass
    return total


def descendants(pid: int) -> list[int]:
    found = []
    try:
        children = Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
    except OSError:
        return found
    for child in map(int, children):
        found += [child, *descendants(child)]
    return found
