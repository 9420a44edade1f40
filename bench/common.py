"""What the benchmarks share: model sizes, and running one measurement in its own process."""

from __future__ import annotations

import json
import os
import subprocess
import sys

SIZES = {
    "tiny": dict(d_model=128, n_heads=4, d_ff=256, layers=4),
    "base": dict(d_model=512, n_heads=8, d_ff=2048, layers=6),
}
VOCAB = 10_000


def measure_in_subprocess(
    script: str, worker_args: list[str], allocator: str, options: list[str]
) -> dict | str:
    """Run ``script --worker ...`` with the allocator set up as asked; its JSON result, or
    the last line of its error output."""
    env = {**os.environ, "AIAYN_MALLOC": allocator}
    proc = subprocess.run(
        [sys.executable, script, *options, "--worker", *worker_args],
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
        from aiayn.runtime import tune_allocator

        tune_allocator()
