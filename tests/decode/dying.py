"""Pool tasks for tests/decode/test_pool.py, in a module that imports neither torch nor
aiayn, so the processes that run them start quickly."""

from __future__ import annotations

import os
import signal


def square_or_die(n: int) -> int:
    """``n * n``, but task 3 kills its own process, as the out-of-memory killer would."""
    if n == 3:
        os.kill(os.getpid(), signal.SIGKILL)
    return n * n
