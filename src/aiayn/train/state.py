"""What a training run carries from update to update: the resumable state, and the sums of a
reporting window."""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field

from aiayn.train.metrics import BY_BLEU, BY_NLL, Criterion, Metric, Row


@dataclass
class TrainerState:
    """Everything beyond model and optimiser that a resumed run needs (saved as JSON)."""

    update: int = 0
    data: dict[str, int] = field(default_factory=lambda: {"epoch": 0, "position": 0})
    best_metric: str | None = None  # the Metric that chose the best checkpoint
    best_valid: float | None = None  # its best value so far
    stale_validations: int = 0
    nonfinite_total: int = 0
    nonfinite_in_row: int = 0
    tokens: int = 0
    train_seconds: float = 0.0
    progress: float = 0.0  # the share of the run's budget spent (updates or time, the further)
    peak_progress: float = 0.0  # the progress when the warm-up ended (0: not yet)
    threads: int = 0  # the CPU threads chosen at the start (0: not yet), kept on resume

    @classmethod
    def restored(cls, saved: dict, *, valid_bleu: bool) -> TrainerState:
        """The state of a checkpoint's ``trainer.json`` (also as aiayn 0.1 wrote it: no
        ``best_metric``, and minus the BLEU as the best value)."""
        values = {k: v for k, v in saved.items() if k in cls.__dataclass_fields__}
        if values.get("best_metric") is None and values.get("best_valid") is not None:
            old = BY_BLEU if valid_bleu else BY_NLL
            values["best_metric"] = old.metric.value
            if old is BY_BLEU:
                values["best_valid"] = -values["best_valid"]
        return cls(**values)

    def record_validation(self, criterion: Criterion, value: float) -> bool:
        """Keep ``value`` as the best when ``criterion`` says it improves on the best so far
        (of the same metric), else count a stale validation; True when it improves."""
        same_metric = self.best_metric == criterion.metric.value
        better = criterion.improves(value, self.best_valid if same_metric else None)
        if better:
            self.best_metric, self.best_valid = criterion.metric.value, value
            self.stale_validations = 0
        else:
            self.stale_validations += 1
        return better


@dataclass
class UpdateResult:
    loss_sum: float
    nll_sum: float
    tokens: int
    finite: bool


class Window:
    """Sums over the updates between two reports. Time spent on other work inside the window
    (validation, checkpoints) is ``excluded`` from its training speed."""

    def __init__(self) -> None:
        self.loss = self.nll = 0.0
        self.tokens = 0
        self.updates = 0
        self.start = time.perf_counter()
        self.excluded = 0.0

    def add(self, result: UpdateResult) -> None:
        self.updates += 1
        if result.finite:
            self.loss += result.loss_sum
            self.nll += result.nll_sum
            self.tokens += result.tokens

    @property
    def seconds(self) -> float:
        return time.perf_counter() - self.start

    def losses(self) -> Row:
        """Loss, NLL and perplexity per target token (of training, or of a validation)."""
        tokens = max(self.tokens, 1)
        nll = self.nll / tokens
        return {
            Metric.LOSS: self.loss / tokens,
            Metric.NLL: nll,
            Metric.PPL: math.exp(min(nll, 50.0)),
        }

    def summary(self) -> Row:
        speed = self.tokens / max(self.seconds - self.excluded, 1e-9)
        return self.losses() | {Metric.TOKENS_PER_S: speed}
