"""The process's memory: glibc malloc's set-up for training's speed, oneDNN's kernel cache
in a decoding process, free heap handed back between stages, and the resident size. Imports
no torch, so that commands which need none (``aiayn prepare``) start without it."""

from __future__ import annotations

import ctypes
import ctypes.util
import functools
import os
import sys

# mallopt parameters (glibc malloc.h)
_M_TRIM_THRESHOLD = -1
_M_MMAP_MAX = -4
# Entries of ideep's own cache of oneDNN computations (its default: 1024). oneDNN's primitive
# cache below it keeps the compiled kernels either way; ideep's entries add buffers for
# each batch shape met (~5 MB per shape in a bfloat16 Transformer-Tiny training step), for
# no speed measured in training or decoding.
_IDEEP_CACHE_ENTRIES = "64"
# oneDNN compiles a kernel for every operator shape it meets and keeps the last 1,024 (its
# primitive cache; ~0.45 MB each for Transformer-Tiny's linear maps). Training meets a few
# hundred shapes and reuses them, so it keeps the default: a smaller cache there evicts and
# recompiles kernels between its activations. Decoding meets a new row count at nearly every
# step (sentences end, beams finish), most once, so a decoding process keeps 64: Multi30k's
# two test sets at beam 5 peak at 498-549 MiB instead of 682-684, at the same speed.
KERNEL_CACHE_VARIABLE = "ONEDNN_PRIMITIVE_CACHE_CAPACITY"
_DECODING_KERNEL_CACHE_ENTRIES = "64"


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


def limit_kernel_cache() -> None:
    """For a process that only decodes: keep oneDNN's 64 latest compiled kernels, not 1,024
    (``ONEDNN_PRIMITIVE_CACHE_CAPACITY``, unless set already). oneDNN reads it once, at its
    first operator: call this before a model is loaded (packing its weights is one)."""
    os.environ.setdefault(KERNEL_CACHE_VARIABLE, _DECODING_KERNEL_CACHE_ENTRIES)


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
    """Give the heap's free pages back to the kernel (glibc's ``malloc_trim``) when a process
    moves on to work whose memory differs (after training; after an update that met a new
    batch shape): with trimming off (``tune_allocator``) they would otherwise stay resident
    until the process ends."""
    libc = _glibc()
    if libc is not None:  # other allocators are left to their own ways
        libc.malloc_trim(0)


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
