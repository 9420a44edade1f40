"""Process set-up for training and inference: seeds, devices, and multi-process (torchrun)
groups (the memory allocator's set-up is ``aiayn.memory``). Only the CLI, train and serve
import this (models and decoding never do)."""

from __future__ import annotations

import datetime
import os
import time
from dataclasses import dataclass

import psutil
import torch
import torch.distributed as dist

from aiayn.errors import AiaynError

IDLE_SAMPLE_S = 0.5  # how long idle_cores watches the machine


@dataclass(frozen=True)
class CpuSample:
    """CPU seconds counted up to one moment: the whole machine's busy time and this
    process's own (all its threads)."""

    wall: float
    machine_busy: float
    own: float


def cpu_sample() -> CpuSample:
    machine = psutil.cpu_times()
    own = psutil.Process().cpu_times()
    busy = sum(machine) - machine.idle - getattr(machine, "iowait", 0.0)
    return CpuSample(time.monotonic(), busy, own.user + own.system)


def idle_cores(since: CpuSample | None = None) -> int:
    """The CPU cores this process may use that other processes leave idle now: the cores it
    may run on less those other processes kept busy since ``since`` (a :func:`cpu_sample`
    taken before this process's own set-up, which is not counted), over at least
    ``IDLE_SAMPLE_S`` seconds; at least 1. On a busy machine more threads than idle cores make
    each update wait for the slowest (PyTorch's threads spin and wait for each other);
    training's ``run.threads = 0`` and ``aiayn translate --threads 0`` use this many. Sampled
    now rather than read from the load average, which still counts work that just ended (a
    pipeline's own data preparation) for a minute after it ended."""
    start = since or cpu_sample()
    time.sleep(max(0.0, IDLE_SAMPLE_S - (time.monotonic() - start.wall)))
    end = cpu_sample()
    others = (end.machine_busy - start.machine_busy) - (end.own - start.own)
    busy = max(0.0, others) / (end.wall - start.wall)
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    machine = psutil.cpu_count() or 1
    return max(1, min(cores or 1, round(machine - busy)))


def mixed_seed(seed: int, rank: int, counter: int) -> int:
    """One seed from the run's seed, the process's rank and a counter (an update or a batch
    number). Randomness is re-seeded from it before each update, as fairseq does, so a
    resumed run draws exactly the same dropout masks and batches without saving RNG state."""
    return ((seed * 1_000_003 + rank) * 1_000_003 + counter) % (2**63)


DEVICES = "auto, cpu, cuda, cuda:N or mps"


def select_device(spec: str, *, local_rank: int = 0) -> torch.device:
    """The device this process trains or decodes on.

    ``auto`` is the GPU of this process's local rank when CUDA is available, else the CPU.
    ``cuda`` without an index is also the local rank's GPU, so that the processes torchrun
    starts on one machine each take their own GPU (``cuda:LOCAL_RANK``) rather than all
    piling onto GPU 0. An explicit ``cuda:N`` is taken as given. ``mps`` is an Apple GPU
    (Metal), where this PyTorch has it; ``auto`` never picks it.
    """
    if spec == "auto":
        spec = "cuda" if torch.cuda.is_available() else "cpu"
    try:
        device = torch.device(spec)
    except RuntimeError:
        raise DeviceError(f"unknown device {spec!r} (use {DEVICES})") from None
    if device.type not in ("cpu", "cuda", "mps"):
        raise DeviceError(f"device {spec!r} is not supported (use {DEVICES})")
    if device.type == "mps":
        if not torch.backends.mps.is_available():
            raise DeviceError(f"device {spec!r}: no Apple GPU (MPS) in this PyTorch or machine")
        return torch.device("mps")
    if device.type == "cuda":
        if not torch.cuda.is_available():
            raise DeviceError(f"device {spec!r}: CUDA is not available on this machine")
        if device.index is None:
            device = torch.device("cuda", local_rank)
        if device.index >= torch.cuda.device_count():
            count = torch.cuda.device_count()
            raise DeviceError(f"device {device}: this machine has {count} GPU(s)")
    return device


class DeviceError(AiaynError):
    """A device that does not exist here."""


def computes_bfloat16(device: torch.device) -> bool:
    """True where bfloat16 matrix products run in hardware: an NVIDIA GPU of compute
    capability 8.0 on (Ampere; ``torch.cuda.is_bf16_supported()`` also counts emulation), an
    AMD GPU, or an x86 CPU with AVX512-BF16 or AMX whose kernels may use them
    (:func:`cpu_kernels_reach_bfloat16`). Elsewhere PyTorch emulates them: on a 2-core AVX2
    CPU a bf16 training step of the tiny model ran 20× slower than fp32 (193 vs 3,904 target
    tokens/s, ``bench/train.py``). ARM CPUs count as emulating, for want of a check PyTorch
    offers."""
    if device.type == "cuda":
        return bool(torch.version.hip) or torch.cuda.get_device_capability(device) >= (8, 0)
    if device.type == "mps":
        return False  # counted as emulated: auto stays fp32 on an Apple GPU
    return cpu_has_bfloat16() and cpu_kernels_reach_bfloat16()


def cpu_has_bfloat16() -> bool:
    """Whether this CPU has AVX512-BF16 or AMX (its flags, whatever the kernels may use)."""
    cpu = torch.cpu
    return any(
        getattr(cpu, check, lambda: False)()
        for check in ("_is_avx512_bf16_supported", "_is_amx_tile_supported")
    )


# oneDNN's instruction-set limits (ONEDNN_MAX_CPU_ISA, formerly DNNL_MAX_CPU_ISA) that keep its
# bfloat16 instructions: no limit, or a set from AVX512_CORE_BF16 on (the AMX, FP16 and AVX10 ones)
ONEDNN_BFLOAT16_ISAS = ("BF16", "AMX", "FP16", "AVX10")


def cpu_kernels_reach_bfloat16() -> bool:
    """Whether the kernels PyTorch runs may use the CPU's bfloat16 instructions: ATen's
    (``torch.backends.cpu.get_cpu_capability()``, which ``ATEN_CPU_CAPABILITY`` holds down)
    reach AVX512, and oneDNN's instruction set (``ONEDNN_MAX_CPU_ISA``) is not held below
    AVX512-BF16. An AVX512-BF16 machine held to AVX2 (``bench/decode.py --isa avx2``)
    computes bfloat16 as an AVX2 one does: emulated."""
    if torch.backends.cpu.get_cpu_capability() != "AVX512":
        return False
    limit = os.environ.get("ONEDNN_MAX_CPU_ISA") or os.environ.get("DNNL_MAX_CPU_ISA") or "ALL"
    limit = limit.strip().upper()
    return limit in ("ALL", "DEFAULT") or any(isa in limit for isa in ONEDNN_BFLOAT16_ISAS)


def resolve_precision(requested: str, device: torch.device) -> str:
    """``auto`` is ``bf16`` where ``device`` computes bfloat16 in hardware, else ``fp32``;
    any other precision is kept as asked."""
    if requested != "auto":
        return requested
    return "bf16" if computes_bfloat16(device) else "fp32"


def decoding_precision(requested: str, device: torch.device) -> str:
    """The one place a decoding precision meets a machine: ``auto`` resolved
    (``resolve_precision``), and a precision ``device`` cannot decode in refused: int8 runs
    on PyTorch's quantised CPU kernels only. (A profile refuses what it does not implement:
    the reference profile's stepper, int8.)

    Raises:
        DeviceError: int8 on a GPU.
    """
    precision = resolve_precision(requested, device)
    if precision == "int8" and device.type != "cpu":
        raise DeviceError(
            f"precision int8 decodes on the CPU only (PyTorch's quantised CPU kernels), "
            f"not on {device}: use fp32 or bf16 there"
        )
    return precision


def emulated_bfloat16_warning(precision: str, device: torch.device) -> str | None:
    """A one-line warning when ``precision`` is bf16 on a device that emulates it."""
    if precision != "bf16" or computes_bfloat16(device):
        return None
    if device.type == "cuda":
        lacks = "compute capability 8.0"
    elif cpu_has_bfloat16():
        lacks = "kernels held below AVX512-BF16 by ATEN_CPU_CAPABILITY or ONEDNN_MAX_CPU_ISA"
    else:
        lacks = "AVX512-BF16 or AMX"
    return (
        f"warning: bf16 on {device} without bfloat16 hardware ({lacks}) is emulated and "
        "many times slower than fp32 here; use precision fp32 or auto"
    )


@dataclass(frozen=True)
class Distributed:
    """This process's place in a torchrun job (rank 0 of 1 without torchrun)."""

    rank: int = 0
    world_size: int = 1
    local_rank: int = 0

    @property
    def is_main(self) -> bool:
        return self.rank == 0

    @property
    def enabled(self) -> bool:
        return self.world_size > 1


def distributed_from_env(environ: dict[str, str] | None = None) -> Distributed:
    """The ranks torchrun puts in the environment (RANK, WORLD_SIZE, LOCAL_RANK)."""
    env = os.environ if environ is None else environ
    world_size = int(env.get("WORLD_SIZE", "1"))
    if world_size == 1:
        return Distributed()
    return Distributed(int(env["RANK"]), world_size, int(env.get("LOCAL_RANK", "0")))


def init_distributed(place: Distributed, device: torch.device, *, timeout_minutes: float) -> None:
    """Join the process group torchrun describes (NCCL on GPUs, gloo on CPUs); on a GPU,
    first make ``device`` this process's current CUDA device, as NCCL expects. A collective
    that waits longer than ``timeout_minutes`` (a rank that died, a hung machine) fails."""
    if not place.enabled or dist.is_initialized():
        return
    timeout = datetime.timedelta(minutes=timeout_minutes)
    if device.type == "cuda":
        torch.cuda.set_device(device)
        dist.init_process_group(backend="nccl", device_id=device, timeout=timeout)
    else:
        dist.init_process_group(backend="gloo", timeout=timeout)


class DistributedTimeout(AiaynError):
    """Another training process stopped answering (died, or hung) for longer than the
    collective time-out."""


def distributed_failure(error: BaseException, *, timeout_minutes: float) -> AiaynError | None:
    """A one-line error for a collective that failed because another rank stopped answering
    (gloo's and NCCL's time-outs and broken connections); None for any other error."""
    if not (dist.is_available() and dist.is_initialized()):
        return None
    kinds = tuple(k for k in (getattr(dist, "DistError", None),) if k is not None)
    text = " ".join(str(error).split())
    timed_out = "timed out" in text.lower() or "timeout" in text.lower()
    if not (isinstance(error, kinds) or (isinstance(error, RuntimeError) and timed_out)):
        return None
    what = "did not answer within" if timed_out else "went away before"
    return DistributedTimeout(
        f"rank {dist.get_rank()}: another training process {what} the "
        f"{timeout_minutes:g}-minute collective time-out (run.dist_timeout_minutes); "
        f"stop every rank and resume with --resume ({text[:120]})"
    )


def ddp_arguments(device: torch.device) -> dict[str, object]:
    """DistributedDataParallel's placement arguments: on a GPU, the one device its replica
    lives on (without them DDP treats the module as multi-device and GPU 0 as the output)."""
    if device.type == "cuda":
        return {"device_ids": [device.index], "output_device": device.index}
    return {}
