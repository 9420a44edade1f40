"""What training measures, and where it goes: typed metric names, the best-checkpoint
criterion, ``RUN/metrics.jsonl`` plus TensorBoard, and the reporter a person watches.

Nothing here prints: by default a run's news goes to the ``logging`` module (logger
``aiayn``), and the command line gives the trainer a ``Reporter`` that prints.
"""

from __future__ import annotations

import json
import logging
import time
from dataclasses import dataclass
from enum import Enum
from pathlib import Path
from typing import Any, Protocol

from aiayn.errors import AiaynError

METRICS_FILE = "metrics.jsonl"


class Metric(str, Enum):
    """The names of logged values: one definition, used by the trainer, validators, the
    command line and the plots (the string values are the keys in ``metrics.jsonl``)."""

    LOSS = "loss"  # label-smoothed loss per target token
    NLL = "nll"  # negative log-likelihood per target token (nats)
    PPL = "ppl"  # exp(NLL)
    LR = "lr"
    TOKENS_PER_S = "tokens_per_s"  # target tokens per second of training (validation and
    # checkpoints excluded)
    RSS_MB = "rss_mb"  # the process's resident memory now, MiB
    PEAK_RSS_MB = "peak_rss_mb"  # its peak so far
    EPOCH = "epoch"
    BLEU = "bleu"  # validation BLEU (tokenised for the target language: RUN/valid_signatures.txt)
    CHRF = "chrf"  # validation chrF
    BLEU_BEAM = "bleu_beam"  # the beam size BLEU was decoded with (1: greedy)


class Kind(str, Enum):
    """Which kind of row of ``metrics.jsonl``."""

    TRAIN = "train"
    VALID = "valid"


@dataclass(frozen=True)
class Criterion:
    """Which validation metric chooses the best checkpoint, and which way is better."""

    metric: Metric
    higher_is_better: bool

    def improves(self, value: float, best: float | None) -> bool:
        if best is None:
            return True
        return value > best if self.higher_is_better else value < best


BY_NLL = Criterion(Metric.NLL, higher_is_better=False)
BY_BLEU = Criterion(Metric.BLEU, higher_is_better=True)
CRITERIA = {c.metric.value: c for c in (BY_NLL, BY_BLEU)}

Row = dict[Metric, float]


class Reporter(Protocol):
    """Where a run tells a person how it goes (the command line shows it)."""

    def log(self, message: str) -> None:
        """A line of news: resumed, validated, stopped."""
        ...

    def progress(self, update: int, total: int, row: Row | None) -> None:
        """After each update; ``row`` is the latest training report, when there is one."""
        ...

    def close(self) -> None: ...


LOGGER = logging.getLogger("aiayn")


class LoggingReporter:
    """Sends a run's news to the ``aiayn`` logger (INFO), and no progress: the default for
    library use, shown only where the program embedding aiayn configures logging."""

    def log(self, message: str) -> None:
        LOGGER.info(message)

    def progress(self, update: int, total: int, row: Row | None) -> None:
        pass

    def close(self) -> None:
        pass


class SilentReporter:
    """Reports nothing: the default for library use."""

    def log(self, message: str) -> None:
        pass

    def progress(self, update: int, total: int, row: Row | None) -> None:
        pass

    def close(self) -> None:
        pass


SLOW_FRACTION = 1 / 3  # a window this much slower than the first: warned about, once


class SpeedWatch:
    """Says once when a window's tokens/s falls below ``SLOW_FRACTION`` of the first's."""

    def __init__(self) -> None:
        self.first: float | None = None  # the first window's tokens/s
        self.warned = False

    def check(self, speed: float, threads: int) -> str | None:
        """The warning for a window of ``speed`` tokens/s trained on ``threads`` threads, or
        None."""
        if self.first is None:
            self.first = speed
            return None
        if self.warned or speed >= SLOW_FRACTION * self.first:
            return None
        self.warned = True
        return (
            f"warning: {speed:,.0f} target tokens/s, {speed / self.first:.0%} of the "
            f"first window's: the CPU is busy with other work? Fewer threads may help "
            f"(run.threads = 1 or --set run.threads=1; now {threads})"
        )


def train_message(update: int, row: Row) -> str:
    """The line a reporter gets for a window of training updates (``row``: its summary, the
    learning rate, memory and epoch)."""
    return (
        f"update {update:>6} | loss {row[Metric.LOSS]:.3f} | nll {row[Metric.NLL]:.3f} | "
        f"ppl {row[Metric.PPL]:.2f} | lr {row[Metric.LR]:.2e} | "
        f"{row[Metric.TOKENS_PER_S]:,.0f} tok/s | {row[Metric.RSS_MB]:,.0f} MiB | "
        f"epoch {row[Metric.EPOCH]:.0f}"
    )


def valid_message(update: int, row: Row, *, best: bool) -> str:
    """The line a reporter gets for a validation (``best``: its model is the best so far)."""
    shown = (Metric.LOSS, Metric.NLL, Metric.PPL, Metric.BLEU_BEAM)
    extra = "".join(f" | {k.value} {v:.2f}" for k, v in row.items() if k not in shown)
    return (
        f"valid  {update:>6} | loss {row[Metric.LOSS]:.3f} | nll {row[Metric.NLL]:.3f} | "
        f"ppl {row[Metric.PPL]:.2f}{extra}" + (" | best" if best else "")
    )


class MetricsLog:
    """Writes ``RUN/metrics.jsonl`` and TensorBoard events in ``RUN/tensorboard`` (rank 0 only).

    A resumed run first drops the rows of updates after its checkpoint (they were logged by
    the run that was interrupted, and are about to be done again), so no update is logged
    twice.
    """

    def __init__(self, run_dir: Path, *, enabled: bool = True, resume_after: int = 0):
        self.enabled = enabled
        self._file = None
        self._tb: Any = None
        if enabled:
            run_dir.mkdir(parents=True, exist_ok=True)
            path = run_dir / METRICS_FILE
            _keep_rows_up_to(path, resume_after)
            self._file = open(path, "a", encoding="utf-8")  # noqa: SIM115
            from torch.utils.tensorboard import SummaryWriter

            self._tb = SummaryWriter(str(run_dir / "tensorboard"), purge_step=resume_after + 1)

    def write(self, kind: Kind, update: int, values: Row) -> None:
        if not self.enabled:
            return
        row = {"kind": kind.value, "update": update, "time": time.time()}
        row |= {Metric(k).value: v for k, v in values.items()}
        self._file.write(json.dumps(row) + "\n")
        self._file.flush()
        for key, value in values.items():
            self._tb.add_scalar(f"{kind.value}/{Metric(key).value}", value, update)

    def close(self) -> None:
        if self._file is not None:
            self._file.close()
            self._file = None
        if self._tb is not None:
            self._tb.close()
            self._tb = None


def _keep_rows_up_to(path: Path, update: int) -> None:
    """Rewrite ``path`` without the rows of updates after ``update`` (and without a torn last
    line, which a killed run can leave)."""
    if not path.is_file():
        return
    kept = []
    for line in path.read_text(encoding="utf-8", errors="replace").splitlines():
        try:
            row = json.loads(line)
        except ValueError:
            continue
        if isinstance(row, dict) and row.get("update", 0) <= update:
            kept.append(line)
    path.write_text("".join(f"{line}\n" for line in kept), encoding="utf-8")


class MetricsError(AiaynError, ValueError):
    """A metrics log that cannot be read."""


def read_metrics(run_dir: str | Path) -> dict[Kind, list[dict[str, float]]]:
    """Rows of a run's metrics log grouped by kind, by update (the later row wins if an
    update was logged twice). A torn last line (a killed run) is skipped.

    Raises:
        MetricsError: the log is missing, or a line other than the last is not a JSON row
            (file and line named).
    """
    path = Path(run_dir) / METRICS_FILE
    if not path.is_file():
        raise MetricsError(f"{path}: no metrics log (is {run_dir} a run directory?)")
    lines = path.read_text(encoding="utf-8", errors="replace").splitlines()
    rows: dict[Kind, dict[int, dict[str, float]]] = {}
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
            kind, update = Kind(row["kind"]), int(row["update"])
        except (ValueError, KeyError, TypeError) as e:
            if number == len(lines):
                continue
            raise MetricsError(f"{path}: line {number}: not a metrics row ({e})") from None
        rows.setdefault(kind, {})[update] = row
    return {kind: [by_update[u] for u in sorted(by_update)] for kind, by_update in rows.items()}
