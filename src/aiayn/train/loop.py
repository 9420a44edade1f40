"""The training loop: the paper's recipe (§5.3, §5.4), accumulation, mixed precision,
validation, checkpoints, resume, and data-parallel training under torchrun."""

from __future__ import annotations

import contextlib
import json
import math
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel

from aiayn.config import TrainConfig, config_to_dict
from aiayn.models import build_model
from aiayn.runtime import (
    Distributed,
    ddp_arguments,
    distributed_from_env,
    init_distributed,
    select_device,
)
from aiayn.train.checkpoint import (
    list_checkpoints,
    load_checkpoint,
    save_checkpoint,
    write_model_dir,
)
from aiayn.train.metrics import MetricsLog
from aiayn.train.schedule import learning_rate
from aiayn.train.tasks import make_task

Validator = Callable[[nn.Module], dict[str, float]]
"""Extra validation metrics from the model in eval mode, e.g. BLEU (wired in by the CLI)."""


class TrainingError(RuntimeError):
    """The run cannot go on (diverged, or a run directory in the way); said in one line."""


@dataclass
class TrainerState:
    """Everything beyond model and optimiser that a resumed run needs (saved as JSON)."""

    update: int = 0
    data: dict[str, int] = field(default_factory=lambda: {"epoch": 0, "position": 0})
    best_valid: float | None = None
    stale_validations: int = 0
    nonfinite_total: int = 0
    nonfinite_in_row: int = 0
    tokens: int = 0
    train_seconds: float = 0.0


@dataclass
class UpdateResult:
    loss_sum: float
    nll_sum: float
    tokens: int
    finite: bool


class Trainer:
    """Trains ``cfg`` into ``cfg.run.dir``. Use ``Trainer(cfg).train()``."""

    def __init__(
        self,
        cfg: TrainConfig,
        *,
        resume: bool = False,
        log: Callable[[str], None] | None = None,
        validators: Sequence[Validator] = (),
    ):
        self.cfg = cfg
        self.validators = list(validators)
        self.run_dir = Path(cfg.run.dir)
        if cfg.run.threads > 0:
            torch.set_num_threads(cfg.run.threads)
        self.dist: Distributed = distributed_from_env()
        self.device = select_device(cfg.run.device, local_rank=self.dist.local_rank)
        init_distributed(self.dist, self.device)
        self._log = log or (lambda m: print(m, file=sys.stderr, flush=True))
        self.task = make_task(cfg, self.dist, self.device)
        self.model_cfg = self.task.model_config(cfg.model)
        torch.manual_seed(cfg.run.seed)  # the same initial weights on every rank
        self.model = build_model(self.model_cfg).to(self.device)
        self.optimizer = _make_optimizer(cfg, self.model)
        self.scaler = torch.amp.GradScaler(self.device.type, enabled=cfg.run.precision == "fp16")
        self.state = TrainerState()
        self._prepare_run_dir(resume)
        self.loss_model = self.task.loss_module(self.model, epsilon=cfg.optim.label_smoothing)
        self.forward_model: nn.Module = self.loss_model
        if self.dist.enabled:
            self.forward_model = DistributedDataParallel(
                self.loss_model, **ddp_arguments(self.device)
            )
        if cfg.run.compile:
            self.forward_model = torch.compile(self.forward_model, dynamic=True)
        self.metrics = MetricsLog(self.run_dir, enabled=self.dist.is_main)

    def log(self, message: str) -> None:
        if self.dist.is_main:
            self._log(message)

    # -- set-up ---------------------------------------------------------------------------

    def _prepare_run_dir(self, resume: bool) -> None:
        checkpoints = list_checkpoints(self.run_dir)
        if checkpoints and not resume:
            raise TrainingError(
                f"{self.run_dir} already has checkpoints: pass --resume to continue it, "
                "or choose another run.dir"
            )
        if checkpoints:
            saved = load_checkpoint(checkpoints[-1], model=self.model, optimizer=self.optimizer)
            self.state = TrainerState(**saved)
            self.task.load_data_state(self.state.data)
            self.log(f"resumed from {checkpoints[-1]} (update {self.state.update})")
        elif resume:
            self.log(f"no checkpoint in {self.run_dir}: starting from scratch")
        if self.dist.is_main:
            self.run_dir.mkdir(parents=True, exist_ok=True)
            resolved = json.dumps(config_to_dict(self.cfg), indent=2)
            (self.run_dir / "config.json").write_text(resolved)

    # -- the loop -------------------------------------------------------------------------

    def train(self) -> TrainerState:
        run = self.cfg.run
        self.log(
            f"training {sum(p.numel() for p in self.model.parameters()):,} parameters "
            f"on {self.device} ({self.dist.world_size} process(es), {run.precision})"
        )
        progress = self.metrics.progress(total=run.max_updates, initial=self.state.update)
        window = _Window()
        self._window_start = window.start
        first_update = self.state.update
        try:
            while not self._should_stop():
                result = self._update()
                window.add(result)
                progress.update(1)
                if self.state.update % run.log_every == 0:
                    self._report(window, progress)
                    window = _Window()
                    self._window_start = window.start
                if self.state.update % run.valid_every == 0 and self._validate():
                    break
                if self.state.update % run.save_every == 0:
                    self.save()
        finally:
            progress.close()
        if window.updates:
            self._report(window, progress)
        finished_before = self.state.update == first_update  # resumed after its last update
        if self.state.update % run.save_every != 0 and not finished_before:
            self.save()
        if self.state.update % run.valid_every != 0 and not finished_before:
            self._validate()
        self.metrics.close()
        return self.state

    def _should_stop(self) -> bool:
        run = self.cfg.run
        if self.state.update >= run.max_updates:
            return True
        if run.max_epochs and self.task.epoch >= run.max_epochs:
            return True
        if not run.max_minutes:
            return False
        elapsed = self.state.train_seconds + time.perf_counter() - self._window_start
        out_of_time = torch.tensor(float(elapsed > 60.0 * run.max_minutes))
        if self._all_reduce(out_of_time).item() > 0:  # every rank stops at the same update
            self.log(f"time budget of {run.max_minutes:g} minutes used: stopping")
            return True
        return False

    def _update(self) -> UpdateResult:
        """One optimiser step over ``update_freq`` batches (gradient accumulation)."""
        cfg = self.cfg
        self.model.train()
        update = self.state.update + 1
        torch.manual_seed(_update_seed(cfg.run.seed, self.dist.rank, update))
        batches = [self.task.next_batch() for _ in range(cfg.optim.update_freq)]
        local_tokens = sum(b.n_tgt_tokens for b in batches)
        tokens = int(self._all_reduce(torch.tensor(float(local_tokens))).item())
        # Gradients are summed over micro-batches and ranks, then divided by the target
        # tokens of the whole update (DDP averages over ranks, hence × world size).
        scale = self.dist.world_size / max(tokens, 1)
        loss_sum = torch.zeros((), device=self.device)
        nll_sum = torch.zeros((), device=self.device)
        for i, batch in enumerate(batches):
            last = i == len(batches) - 1
            with self._maybe_no_sync(last), self._autocast():
                loss, nll = self.forward_model(*batch.model_inputs)
                self.scaler.scale(loss * scale).backward()
            loss_sum += loss.detach()
            nll_sum += nll.detach()
        totals = self._all_reduce(torch.stack([loss_sum, nll_sum]))
        finite = bool(torch.isfinite(totals).all())
        if finite:
            self._step(update)
            self.state.nonfinite_in_row = 0
        else:
            self._skip_nonfinite(update)
        self.optimizer.zero_grad(set_to_none=True)
        self.state.update = update
        self.state.tokens += tokens
        self.state.data = self.task.data_state()
        return UpdateResult(float(totals[0]), float(totals[1]), tokens, finite)

    def _step(self, update: int) -> None:
        cfg = self.cfg
        lr = learning_rate(
            update, cfg.optim, d_model=self.model_cfg.d_model, max_updates=cfg.run.max_updates
        )
        for group in self.optimizer.param_groups:
            group["lr"] = lr
        if cfg.optim.clip_norm > 0:
            self.scaler.unscale_(self.optimizer)
            nn.utils.clip_grad_norm_(self.model.parameters(), cfg.optim.clip_norm)
        self.scaler.step(self.optimizer)
        self.scaler.update()

    def _skip_nonfinite(self, update: int) -> None:
        self.state.nonfinite_total += 1
        self.state.nonfinite_in_row += 1
        self.log(
            f"update {update}: non-finite loss, update skipped "
            f"({self.state.nonfinite_in_row} in a row)"
        )
        if self.state.nonfinite_in_row >= self.cfg.run.max_nonfinite:
            raise TrainingError(
                f"{self.state.nonfinite_in_row} non-finite losses in a row at update {update}: "
                "the run diverged (try a lower learning rate, more warm-up, or clip_norm)"
            )

    # -- reporting, validation, checkpoints -------------------------------------------------

    def _report(self, window: _Window, progress: Any) -> None:
        lr = self.optimizer.param_groups[0]["lr"]
        row = window.summary() | {"lr": lr, "epoch": self.task.epoch}
        self.state.train_seconds += window.seconds
        self.metrics.write("train", self.state.update, row)
        progress.set_postfix(
            loss=f"{row['loss']:.3f}",
            lr=f"{lr:.2e}",
            tok_s=f"{row['tokens_per_s']:,.0f}",
            refresh=False,
        )
        self.metrics.line(
            f"update {self.state.update:>6} | loss {row['loss']:.3f} | nll {row['nll']:.3f} | "
            f"ppl {row['ppl']:.2f} | lr {lr:.2e} | {row['tokens_per_s']:,.0f} tok/s | "
            f"epoch {self.task.epoch}"
        )

    @torch.no_grad()
    def validate(self) -> dict[str, float]:
        self.model.eval()
        loss_sum = nll_sum = tokens = 0.0
        for batch in self.task.valid_batches():
            with self._autocast():
                loss, nll = self.loss_model(*batch.model_inputs)
            loss_sum += float(loss)
            nll_sum += float(nll)
            tokens += batch.n_tgt_tokens
        nll = nll_sum / max(tokens, 1)
        row = {"loss": loss_sum / max(tokens, 1), "nll": nll, "ppl": math.exp(min(nll, 50.0))}
        for validator in self.validators:
            row |= validator(self.model)
        self.model.train()
        return row

    def _validate(self) -> bool:
        """Validate, keep the best model; True when early stopping says stop."""
        row = self.validate()
        self.metrics.write("valid", self.state.update, row)
        criterion = _criterion(row)
        better = self.state.best_valid is None or criterion < self.state.best_valid
        if better:
            self.state.best_valid = criterion
            self.state.stale_validations = 0
            if self.dist.is_main:
                best = self.run_dir / "best"
                write_model_dir(best, self.model, self.model_cfg, self.task.assets())
        else:
            self.state.stale_validations += 1
        extra = "".join(
            f" | {k} {v:.2f}"
            for k, v in row.items()
            if k not in ("loss", "nll", "ppl", "bleu_beam")
        )
        self.metrics.line(
            f"valid  {self.state.update:>6} | loss {row['loss']:.3f} | nll {row['nll']:.3f} | "
            f"ppl {row['ppl']:.2f}{extra}" + (" | best" if better else "")
        )
        patience = self.cfg.run.patience
        if patience and self.state.stale_validations >= patience:
            self.log(f"early stop: no improvement in {patience} validations")
            return True
        return False

    def save(self) -> Path | None:
        if not self.dist.is_main:
            return None
        return save_checkpoint(
            self.run_dir,
            self.state.update,
            model=self.model,
            cfg=self.model_cfg,
            optimizer=self.optimizer,
            trainer_state=asdict(self.state),
            assets=self.task.assets(),
            keep_last=self.cfg.run.keep_last,
        )

    # -- helpers ----------------------------------------------------------------------------

    def _autocast(self) -> contextlib.AbstractContextManager:
        precision = self.cfg.run.precision
        if precision == "fp32":
            return contextlib.nullcontext()
        if precision == "fp16" and self.device.type != "cuda":
            raise TrainingError('fp16 needs a GPU; use precision = "bf16" on CPU')
        dtype = torch.bfloat16 if precision == "bf16" else torch.float16
        return torch.autocast(self.device.type, dtype=dtype)

    def _maybe_no_sync(self, last: bool) -> contextlib.AbstractContextManager:
        if self.dist.enabled and not last:
            return self.forward_model.no_sync()
        return contextlib.nullcontext()

    def _all_reduce(self, tensor: torch.Tensor) -> torch.Tensor:
        if self.dist.enabled:
            tensor = tensor.to(self.device)
            dist.all_reduce(tensor)
        return tensor


class _Window:
    """Sums over the updates between two reports."""

    def __init__(self) -> None:
        self.loss = self.nll = 0.0
        self.tokens = 0
        self.updates = 0
        self.start = time.perf_counter()

    def add(self, result: UpdateResult) -> None:
        self.updates += 1
        if result.finite:
            self.loss += result.loss_sum
            self.nll += result.nll_sum
            self.tokens += result.tokens

    @property
    def seconds(self) -> float:
        return time.perf_counter() - self.start

    def summary(self) -> dict[str, float]:
        tokens = max(self.tokens, 1)
        nll = self.nll / tokens
        return {
            "loss": self.loss / tokens,
            "nll": nll,
            "ppl": math.exp(min(nll, 50.0)),
            "tokens_per_s": self.tokens / max(self.seconds, 1e-9),
        }


def _criterion(row: dict[str, float]) -> float:
    """Lower is better: minus BLEU when validation decodes, else the NLL per token."""
    return -row["bleu"] if "bleu" in row else row["nll"]


def _update_seed(seed: int, rank: int, update: int) -> int:
    """Dropout randomness is re-seeded from (seed, rank, update) before every update, as
    fairseq does, so a resumed run draws exactly the same masks without saving RNG state."""
    return ((seed * 1_000_003 + rank) * 1_000_003 + update) % (2**63)


def _make_optimizer(cfg: TrainConfig, model: nn.Module) -> torch.optim.Optimizer:
    optim = cfg.optim
    kind = torch.optim.AdamW if optim.optimizer == "adamw" else torch.optim.Adam
    if optim.optimizer == "adamw":
        decay = [p for p in model.parameters() if p.dim() >= 2]
        no_decay = [p for p in model.parameters() if p.dim() < 2]
        groups = [
            {"params": decay, "weight_decay": optim.weight_decay},
            {"params": no_decay, "weight_decay": 0.0},
        ]
    else:
        groups = [{"params": list(model.parameters()), "weight_decay": optim.weight_decay}]
    return kind(groups, lr=0.0, betas=optim.betas, eps=optim.eps)
