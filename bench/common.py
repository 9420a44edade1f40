"""What the benchmarks share: model sizes, and running one measurement in its own process."""

from __future__ import annotations

import importlib.util
import json
import os
import platform
import subprocess
import sys
import tempfile
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
# --isa: the environment that holds every library a benchmark measures to an instruction set,
# each by its own switch, so that an AVX512 machine measures as an AVX2 one would. MKL only
# restricts its Intel code paths: on AMD CPUs it runs its AVX2 path whatever it is told
# (SGEMM 64 × 512 × 2048 took as long with AVX512, AVX2 and SSE4_2 on a Zen 5 EPYC).
ISAS: dict[str, dict[str, str]] = {
    "native": {},
    "avx2": {
        "ATEN_CPU_CAPABILITY": "avx2",  # PyTorch's own kernels (torch.backends.cpu)
        "ONEDNN_MAX_CPU_ISA": "AVX2",  # oneDNN: PyTorch's packed and int8 maps, CTranslate2's GEMMs
        "MKL_ENABLE_INSTRUCTIONS": "AVX2",  # MKL's SGEMM (PyTorch's float32 nn.Linear)
        "FBGEMM_ENABLE_INSTRUCTIONS": "AVX2",  # FBGEMM's int8 GEMMs (fbgemmInstructionSet)
        "CT2_FORCE_CPU_ISA": "AVX2",  # CTranslate2's own kernels
    },
}
ISA_LACKS = {"native": set(), "avx2": {flag for _, flag in EXTENSIONS if flag != "avx2"}}


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


def hold_to_isa(isa: str) -> list[str]:
    """Set the environment of ``ISAS[isa]`` in this process, which every measuring process
    inherits (before the benchmark imports torch), and return the header lines naming
    each library's instruction set as a fresh process sees it. "native" changes nothing.
    """
    os.environ.update(ISAS[isa])
    if isa == "native":
        return []
    lines = [
        f"--isa {isa}: every system in processes with "
        + " ".join(f"{k}={v}" for k, v in ISAS[isa].items())
    ]
    with tempfile.TemporaryDirectory() as work:
        lines += _probe(_TORCH_PROBE, work)
        if importlib.util.find_spec("ctranslate2") is not None:
            lines += _probe(_CT2_PROBE, work)
    return lines


def _probe(code: str, work: str) -> list[str]:
    """Run ``code`` in a fresh process (oneDNN and CTranslate2 verbose) in ``work``; the
    lines it prints that start with ``"  "``, or why it failed."""
    env = {**os.environ, "ONEDNN_VERBOSE": "1", "CT2_VERBOSE": "1", "PYTHONPATH": _path()}
    proc = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=env, cwd=work
    )
    if proc.returncode != 0:
        return [f"  probe failed: {(proc.stderr.strip().splitlines() or ['?'])[-1]}"]
    found = [line for line in proc.stdout.splitlines() if line.startswith("  ")]
    onednn = [line for line in proc.stdout.splitlines() if ",isa:" in line]
    ct2 = [line.split("] ")[-1] for line in proc.stderr.splitlines() if "Selected ISA" in line]
    if onednn:
        found.append(f"    oneDNN: {onednn[0].split(',isa:')[1]}")
    if ct2:
        found.append(f"    {ct2[0].strip()}")
    return found


def _path() -> str:
    """PYTHONPATH for a probe: this directory (``common``) and what the caller had."""
    here = str(Path(__file__).resolve().parent)
    return os.pathsep.join([here, *filter(None, [os.environ.get("PYTHONPATH")])])


# A fresh PyTorch: its kernels, a packed float32 product (oneDNN), an int8 one (FBGEMM, which
# reports nothing: its env switch is honoured by its dispatch, fbgemmInstructionSet), and a
# tiny model exported for the CTranslate2 probe.
_TORCH_PROBE = """
import os, torch
from aiayn.accel.int8 import reduces_range
from aiayn.interop.ct2 import convert
from aiayn.models import build_model
from common import aiayn_config
x, w = torch.randn(8, 64), torch.randn(64, 64)
torch.ops.mkldnn._linear_pointwise(
    x, torch.ops.mkldnn._reorder_linear_weight(w, None), None, "none", [], "")
print("  PyTorch:", torch.backends.cpu.get_cpu_capability(), "(ATen);",
      "FBGEMM:", os.environ.get("FBGEMM_ENABLE_INSTRUCTIONS", "its best"),
      "(reports nothing; aiayn int8 activations in", 7 if reduces_range() else 8, "bits);",
      "MKL: told", os.environ.get("MKL_ENABLE_INSTRUCTIONS", "nothing"),
      "(on AMD CPUs its AVX2 path, whatever it is told)", flush=True)
vocab = ["<blank>", "<unk>", "<s>", "</s>", *(f"t{i}" for i in range(4, 16))]
torch.manual_seed(0)
convert(build_model(aiayn_config("tiny", vocab=16)).eval(), vocab, vocab, "ct2")
"""
_CT2_PROBE = """
import ctranslate2
t = ctranslate2.Translator("ct2", device="cpu", compute_type="int8", intra_threads=1)
t.translate_batch([["t4", "t5"]], max_decoding_length=2)
print("  CTranslate2 (int8):", flush=True)
"""


def native_precisions(precisions: tuple[str, ...], isa: str = "native") -> list[str]:
    """``precisions`` less bf16 where this CPU, held to ``isa`` (``ISAS``), emulates
    bfloat16 (neither AVX512-BF16 nor AMX): the default of ``--precisions``."""
    emulated = not BFLOAT16_FLAGS & (cpu_flags() - ISA_LACKS[isa])
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
