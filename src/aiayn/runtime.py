"""Process set-up for training and inference: threads, the memory allocator, devices, and
multi-process (torchrun) groups. No aiayn module imports this except the CLI, train and the
pipeline."""

from __future__ import annotations

import ctypes
import ctypes.util
import datetime
import functools
import os
import sys
from dataclasses import dataclass

import torch
import torch.distributed as dist

from aiayn.errors import AiaynError

# mallopt parameters (glibc malloc.h)
_M_TRIM_THRESHOLD = -1
_M_MMAP_THRESHOLD = -3
_M_MMAP_MAX = -4
_GLIBC_MMAP_MAX = 65536  # glibc's default for M_MMAP_MAX
# Entries of ideep's own cache of oneDNN computations (its default: 1024). oneDNN's primitive
# cache below it keeps the compiled kernels either way; ideep's entries add buffers for
# each batch shape met: ~5 MB per shape in a bfloat16 Transformer-Tiny training step, ~200 MB
# of the main job's heap after 300 updates, for no speed measured (training or decoding).
_IDEEP_CACHE_ENTRIES = "64"


def tune_allocator() -> str:
    """Make glibc's malloc keep freed memory instead of returning it to the kernel.

    A training step frees and re-allocates the same large activations every time; with
    glibc's defaults each becomes fresh mmap'd pages and page faults cost ~30% of a small
    model's step on CPU. Turning mmap off for large blocks and never trimming the heap keeps
    them (the effect measured on this project's machines: 1.4×). A preloaded tcmalloc or
    jemalloc is left alone. ideep's shape-keyed cache is capped (``LRU_CACHE_CAPACITY``,
    unless set already), before the first oneDNN call reads it.

    Returns:
        A description of the allocator in use, for logs and benchmark reports.
    """
    os.environ.setdefault("LRU_CACHE_CAPACITY", _IDEEP_CACHE_ENTRIES)
    preload = os.environ.get("LD_PRELOAD", "")
    for name in ("tcmalloc", "jemalloc", "mimalloc"):
        if name in preload:
            return f"{name} (LD_PRELOAD)"
    if os.environ.get("AIAYN_MALLOC", "tuned") == "default":
        return "glibc malloc (default settings)"
    libc = _glibc()
    if libc is None:
        return "system allocator (not glibc: left as is)"
    ok = libc.mallopt(_M_MMAP_MAX, 0) and libc.mallopt(_M_TRIM_THRESHOLD, 1 << 30)
    return "glibc malloc (tuned: no mmap, no trim)" if ok else "glibc malloc (mallopt refused)"


@functools.cache
def _glibc() -> ctypes.CDLL | None:
    """The C library, looked up once, when it is glibc (has ``mallopt`` and
    ``malloc_trim``); else None."""
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c"))
    except (OSError, TypeError):
        return None
    return libc if hasattr(libc, "mallopt") and hasattr(libc, "malloc_trim") else None


def release_free_memory() -> None:
    """Give the heap's free pages back to the kernel (glibc's ``malloc_trim``), between the
    stages of a process (training, then decoding) whose memory differs: with trimming off
    (``tune_allocator``) they would otherwise stay resident until the process ends."""
    libc = _glibc()
    if libc is not None:  # other allocators are left to their own ways
        libc.malloc_trim(0)


def map_large_blocks(min_bytes: int = 4 << 20) -> None:
    """From now on give blocks of ``min_bytes`` or more their own mapping, handed back when
    freed (glibc's default way, which ``tune_allocator`` turns off for training's speed).

    For a stage after training in the same process: beam search's largest tensors (the
    log-probabilities of every hypothesis, ~60 MB for 1,500 × 10k) would otherwise be carved
    from the trained heap's scattered free chunks. Measured on the main job's pipeline (300
    updates, two runs each): the command's peak 1,574 / 1,631 MiB (training's) instead of
    1,970 / 1,985 in the test decoding, which ran 0–15% slower (±10% noise): ~1 s of the job.
    """
    libc = _glibc()
    if libc is not None:
        libc.mallopt(_M_MMAP_MAX, _GLIBC_MMAP_MAX)
        libc.mallopt(_M_MMAP_THRESHOLD, min_bytes)


def memory_mb() -> tuple[float, float]:
    """This process's resident memory now and its peak so far, MiB (now = peak where
    /proc is missing)."""
    import resource

    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss  # KiB on Linux
    peak_mb = peak / (1 << 20) if sys.platform == "darwin" else peak / 1024  # bytes on macOS
    try:
        with open("/proc/self/statm") as f:
            pages = int(f.read().split()[1])
    except OSError:
        return peak_mb, peak_mb
    now_mb = pages * os.sysconf("SC_PAGE_SIZE") / (1 << 20)
    return now_mb, max(peak_mb, now_mb)  # the kernel's peak can lag the page count


def mixed_seed(seed: int, rank: int, counter: int) -> int:
    """One seed from the run's seed, the process's rank and a counter (an update or a batch
    number). Randomness is re-seeded from it before each update, as fairseq does, so a
    resumed run draws exactly the same dropout masks and batches without saving RNG state."""
    return ((seed * 1_000_003 + rank) * 1_000_003 + counter) % (2**63)


def select_device(spec: str, *, local_rank: int = 0) -> torch.device:
    """The device this process trains or decodes on.

    ``auto`` is the GPU of this process's local rank when CUDA is available, else the CPU.
    ``cuda`` without an index is also the local rank's GPU, so that the processes torchrun
    starts on one machine each take their own GPU (``cuda:LOCAL_RANK``) rather than all
    piling onto GPU 0. An explicit ``cuda:N`` is taken as given.
    """
    if spec == "auto":
        spec = "cuda" if torch.cuda.is_available() else "cpu"
    try:
        device = torch.device(spec)
    except RuntimeError:
        raise DeviceError(f"unknown device {spec!r} (use auto, cpu, cuda or cuda:N)") from None
    if device.type not in ("cpu", "cuda"):
        raise DeviceError(f"device {spec!r} is not supported (use auto, cpu, cuda or cuda:N)")
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


def ddp_arguments(device: torch.device) -> dict[str, object]:
    """DistributedDataParallel's placement arguments: on a GPU, the one device its replica
    lives on (without them DDP treats the module as multi-device and GPU 0 as the output)."""
    if device.type == "cuda":
        return {"device_ids": [device.index], "output_device": device.index}
    return {}
