"""Where training progress goes: a progress bar, log lines, JSON lines and TensorBoard."""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from typing import Any

METRICS_FILE = "metrics.jsonl"


class MetricsLog:
    """Writes ``RUN/metrics.jsonl`` and TensorBoard events in ``RUN/tensorboard`` (rank 0 only)."""

    def __init__(self, run_dir: Path, *, enabled: bool = True):
        self.enabled = enabled
        self._bar: Any = None
        self._file = None
        self._tb = None
        if enabled:
            run_dir.mkdir(parents=True, exist_ok=True)
            self._file = open(run_dir / METRICS_FILE, "a", encoding="utf-8")  # noqa: SIM115
            from torch.utils.tensorboard import SummaryWriter

            self._tb = SummaryWriter(str(run_dir / "tensorboard"))

    def write(self, kind: str, update: int, values: dict[str, float]) -> None:
        if not self.enabled:
            return
        row = {"kind": kind, "update": update, "time": time.time(), **values}
        self._file.write(json.dumps(row) + "\n")
        self._file.flush()
        for key, value in values.items():
            self._tb.add_scalar(f"{kind}/{key}", value, update)

    def line(self, message: str) -> None:
        """A log line that does not break the progress bar."""
        if not self.enabled:
            return
        if self._bar is not None and not self._bar.disable:
            self._bar.write(message, file=sys.stderr)
        else:
            print(message, file=sys.stderr, flush=True)

    def progress(self, *, total: int, initial: int) -> Any:
        """A tqdm bar with ETA on an interactive terminal; silent otherwise."""
        from tqdm import tqdm

        disable = not (self.enabled and sys.stderr.isatty())
        self._bar = tqdm(
            total=total,
            initial=initial,
            unit="upd",
            dynamic_ncols=True,
            disable=disable,
            file=sys.stderr,
        )
        return self._bar

    def close(self) -> None:
        if self._file is not None:
            self._file.close()
            self._file = None
        if self._tb is not None:
            self._tb.close()
            self._tb = None
