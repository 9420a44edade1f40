"""The tests whose results depend on the CPU's kernels (marked ``isa``), run again in a process
held to AVX2 by each library's own switch, where this CPU has more: AVX2 without AVX512 or
bfloat16 is what most users' CPUs have, and a regression there shows up here first."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

REPO = Path(__file__).resolve().parents[1]
HELD_TO_AVX2 = {
    "ATEN_CPU_CAPABILITY": "avx2",
    "ONEDNN_MAX_CPU_ISA": "AVX2",
    "MKL_ENABLE_INSTRUCTIONS": "AVX2",
    "FBGEMM_ENABLE_INSTRUCTIONS": "AVX2",
}


@pytest.mark.slow
@pytest.mark.skipif(
    torch.backends.cpu.get_cpu_capability() != "AVX512",
    reason="this CPU's kernels are AVX2 or others already: the isa tests ran as they are",
)
def test_the_isa_tests_pass_held_to_avx2(tmp_path):
    env = {**os.environ, **HELD_TO_AVX2, "OMP_NUM_THREADS": "1"}
    argv = [sys.executable, "-m", "pytest", "-q", "-m", "isa", "-p", "no:cacheprovider"]
    argv += ["-p", "no:randomly", "--basetemp", str(tmp_path / "held"), "tests"]
    done = subprocess.run(argv, cwd=REPO, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]
    assert " passed" in done.stdout.splitlines()[-1]
