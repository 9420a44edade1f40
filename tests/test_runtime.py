"""Device placement and ranks under torchrun, checked without GPUs; the allocator set-up."""

import os
import subprocess
import sys
import textwrap

import pytest
import torch

from aiayn.accel.packed import onednn_available
from aiayn.memory import KERNEL_CACHE_VARIABLE
from aiayn.runtime import (
    DeviceError,
    Distributed,
    computes_bfloat16,
    ddp_arguments,
    distributed_from_env,
    emulated_bfloat16_warning,
    resolve_precision,
    select_device,
)

CPU = torch.device("cpu")


def test_each_local_rank_gets_its_own_gpu(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 4)
    for local_rank in range(4):
        for spec in ("auto", "cuda"):
            assert select_device(spec, local_rank=local_rank) == torch.device("cuda", local_rank)
    assert select_device("cuda:3", local_rank=1) == torch.device("cuda", 3)


def test_without_cuda_auto_is_the_cpu(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert select_device("auto", local_rank=2) == torch.device("cpu")


def hold_cpu(
    monkeypatch,
    *,
    avx512_bf16: bool,
    amx: bool = False,
    aten: str = "AVX512",
    onednn: str | None = None,
) -> None:
    """Make this process see a CPU with the given bfloat16 flags whose kernels are held to
    ``aten`` (ATEN_CPU_CAPABILITY's effect) and ``onednn`` (ONEDNN_MAX_CPU_ISA; None: unset)."""
    monkeypatch.setattr(torch.cpu, "_is_avx512_bf16_supported", lambda: avx512_bf16)
    monkeypatch.setattr(torch.cpu, "_is_amx_tile_supported", lambda: amx)
    monkeypatch.setattr(torch.backends.cpu, "get_cpu_capability", lambda: aten)
    monkeypatch.delenv("DNNL_MAX_CPU_ISA", raising=False)
    if onednn is None:
        monkeypatch.delenv("ONEDNN_MAX_CPU_ISA", raising=False)
    else:
        monkeypatch.setenv("ONEDNN_MAX_CPU_ISA", onednn)


@pytest.mark.parametrize(
    ("avx512_bf16", "amx", "auto"),
    [(True, False, "bf16"), (False, True, "bf16"), (False, False, "fp32")],
)
def test_auto_precision_is_bf16_only_on_bfloat16_hardware(monkeypatch, avx512_bf16, amx, auto):
    hold_cpu(monkeypatch, avx512_bf16=avx512_bf16, amx=amx)
    assert resolve_precision("auto", CPU) == auto
    for asked in ("fp32", "bf16", "fp16"):
        assert resolve_precision(asked, CPU) == asked  # what is asked for explicitly is kept
    warning = emulated_bfloat16_warning("bf16", CPU)
    assert (warning is None) == (auto == "bf16")
    assert emulated_bfloat16_warning("fp32", CPU) is None


@pytest.mark.parametrize(
    ("aten", "onednn", "auto"),
    [
        ("AVX512", None, "bf16"),
        ("AVX2", None, "fp32"),  # ATEN_CPU_CAPABILITY=avx2 (bench --isa avx2)
        ("DEFAULT", None, "fp32"),
        ("AVX512", "AVX2", "fp32"),  # ONEDNN_MAX_CPU_ISA=AVX2 alone
        ("AVX512", "avx512_core", "fp32"),  # AVX512 without its bfloat16 instructions
        ("AVX512", "AVX512_CORE_BF16", "bf16"),
        ("AVX512", "AVX512_CORE_AMX", "bf16"),
        ("AVX512", "ALL", "bf16"),
        ("AVX2", "ALL", "fp32"),
    ],
)
def test_auto_precision_follows_the_kernels_the_cpu_is_held_to(monkeypatch, aten, onednn, auto):
    """A bfloat16 CPU whose kernels are held to AVX2 (``bench/decode.py --isa avx2``) emulates
    bfloat16 as an AVX2 CPU does: auto is fp32 there and bf16 warns, naming the hold."""
    hold_cpu(monkeypatch, avx512_bf16=True, amx=True, aten=aten, onednn=onednn)
    assert resolve_precision("auto", CPU) == auto
    warning = emulated_bfloat16_warning("bf16", CPU)
    assert (warning is None) == (auto == "bf16")
    assert warning is None or "ONEDNN_MAX_CPU_ISA" in warning


def test_auto_precision_is_fp32_in_a_process_held_to_avx2():
    """The real switch, not a patched one: ATEN_CPU_CAPABILITY=avx2 set before torch starts."""
    env = {**os.environ, "ATEN_CPU_CAPABILITY": "avx2"}
    code = (
        "import torch; from aiayn.runtime import resolve_precision; "
        "print(torch.backends.cpu.get_cpu_capability(), "
        "resolve_precision('auto', torch.device('cpu')))"
    )
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    capability, auto = out.stdout.split()
    assert capability != "AVX512" and auto == "fp32"  # AVX2 on x86, its own elsewhere


def test_emulated_bf16_warning_is_one_line(monkeypatch):
    hold_cpu(monkeypatch, avx512_bf16=False)
    warning = emulated_bfloat16_warning("bf16", CPU)
    assert warning is not None and "\n" not in warning and "emulated" in warning
    assert "AVX512-BF16 or AMX" in warning


def test_auto_precision_on_a_gpu_is_bf16_from_ampere_on(monkeypatch):
    """Compute capability 8.0 on: ``torch.cuda.is_bf16_supported()`` would also count a T4's
    or V100's emulation."""
    gpu = torch.device("cuda", 0)
    monkeypatch.setattr(torch.version, "hip", None)
    for capability, expected in (((9, 0), "bf16"), ((8, 0), "bf16"), ((7, 5), "fp32")):
        monkeypatch.setattr(torch.cuda, "get_device_capability", lambda d, c=capability: c)
        assert computes_bfloat16(gpu) is (expected == "bf16")
        assert resolve_precision("auto", gpu) == expected
    assert "compute capability 8.0" in emulated_bfloat16_warning("bf16", gpu)


def test_ddp_pins_a_gpu_replica_to_its_device():
    assert ddp_arguments(torch.device("cuda", 2)) == {"device_ids": [2], "output_device": 2}
    assert ddp_arguments(torch.device("cpu")) == {}


def test_ranks_come_from_the_torchrun_environment():
    env = {"WORLD_SIZE": "8", "RANK": "5", "LOCAL_RANK": "1"}
    assert distributed_from_env(env) == Distributed(rank=5, world_size=8, local_rank=1)
    assert distributed_from_env({}) == Distributed()
    assert not distributed_from_env({}).enabled and distributed_from_env(env).enabled


def test_devices_that_do_not_exist_here_are_refused_in_one_line(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    monkeypatch.setattr(torch.backends.mps, "is_available", lambda: False)
    for spec, words in [("tpu9", "unknown device"), ("mps", "no Apple GPU"), ("cuda", "CUDA")]:
        with pytest.raises(DeviceError, match=words):
            select_device(spec)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 2)
    with pytest.raises(DeviceError, match="2 GPU"):
        select_device("cuda:5")


def test_an_apple_gpu_is_a_device_where_pytorch_has_it(monkeypatch):
    monkeypatch.setattr(torch.backends.mps, "is_available", lambda: True)
    assert select_device("mps") == torch.device("mps")
    assert select_device("auto") != torch.device("mps")  # asked for by name only
    assert resolve_precision("auto", torch.device("mps")) == "fp32"


def _in_fresh_process(code: str, **env: str) -> str:
    """Run ``code`` in a new interpreter (allocator settings are process-wide); its stdout."""
    ours = {"LRU_CACHE_CAPACITY", KERNEL_CACHE_VARIABLE}  # what the code under test may set
    environ = {k: v for k, v in os.environ.items() if k not in ours} | env
    done = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        capture_output=True,
        text=True,
        env=environ,
        check=True,
    )
    return done.stdout.strip()


def test_ideep_cache_is_capped_unless_the_user_set_it():
    code = """
        import os
        from aiayn.memory import tune_allocator
        tune_allocator()
        print(os.environ["LRU_CACHE_CAPACITY"])
    """
    assert int(_in_fresh_process(code)) < 1024
    assert _in_fresh_process(code, LRU_CACHE_CAPACITY="512") == "512"


@pytest.mark.slow
@pytest.mark.skipif(not onednn_available(), reason="PyTorch built without oneDNN")
def test_a_decoding_process_keeps_only_the_latest_compiled_kernels():
    code = """
        import os
        from aiayn.memory import limit_kernel_cache
        if os.environ.get("DECODING_ONLY"):
            limit_kernel_cache()
        import torch
        weight = torch.ops.mkldnn._reorder_linear_weight(torch.zeros(16, 16), None)
        with torch.inference_mode():
            for rows in [*range(1, 101), 1]:  # 100 shapes, then the first one again
                torch.ops.mkldnn._linear_pointwise(
                    torch.zeros(rows, 16), weight, None, "none", [], ""
                )
    """

    def last_lookup(**env: str) -> str:  # oneDNN's log: create:cache_hit or create:cache_miss
        log = _in_fresh_process(code, ONEDNN_VERBOSE="2", **env).replace("\n", ",").split(",")
        return [field for field in log if field.startswith("create:cache_")][-1]

    assert last_lookup() == "create:cache_hit"  # oneDNN's default keeps 1,024
    assert last_lookup(DECODING_ONLY="1") == "create:cache_miss"  # 64: the first one is gone
    assert last_lookup(DECODING_ONLY="1", **{KERNEL_CACHE_VARIABLE: "1024"}) == "create:cache_hit"


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's malloc_trim")
def test_free_heap_pages_go_back_to_the_kernel_when_asked():
    code = """
        from aiayn.memory import memory_mb, release_free_memory, tune_allocator
        tune_allocator()  # no trimming of its own from here on
        blocks = [bytearray(1 << 20) for _ in range(300)]  # 300 MB on the heap, touched
        before = memory_mb()[0]
        del blocks
        kept = memory_mb()[0]
        release_free_memory()
        print(before - kept, before - memory_mb()[0])
    """
    freed_by_free, freed_by_release = map(float, _in_fresh_process(code).split())
    assert freed_by_free < 50  # the tuned allocator keeps what is freed...
    assert freed_by_release > 250  # ...until it is asked to hand it back
