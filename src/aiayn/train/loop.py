"""The training loop: the paper's recipe (§5.3, §5.4), accumulation, mixed precision,
validation, checkpoints, resume, and data-parallel training under torchrun."""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict
from pathlib import Path

import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel

from aiayn.config import TrainConfig
from aiayn.config_io import config_to_dict
from aiayn.errors import AiaynError
from aiayn.memory import memory_mb
from aiayn.models import build_model
from aiayn.runtime import (
    Distributed,
    ddp_arguments,
    distributed_from_env,
    emulated_bfloat16_warning,
    idle_cores,
    init_distributed,
    mixed_seed,
    resolve_precision,
    select_device,
)
from aiayn.store.card import ModelCard, trained_card
from aiayn.store.model_dir import read_model_config, save_model
from aiayn.train.budget import budget_share, plan_lines, planned_end
from aiayn.train.checkpoint import list_checkpoints, restore_newest, save_checkpoint
from aiayn.train.collective import all_reduce, autocast, no_sync_unless_last
from aiayn.train.init_from import check_init_from, load_init_weights
from aiayn.train.metrics import (
    BY_BLEU,
    BY_NLL,
    Criterion,
    Kind,
    LoggingReporter,
    Metric,
    MetricsLog,
    Reporter,
    Row,
    SpeedWatch,
    train_message,
    valid_message,
)
from aiayn.train.optim import make_optimizer
from aiayn.train.run_dir import (
    RunLock,
    check_run_directory,
    check_same_architecture,
    check_same_vocabularies,
)
from aiayn.train.schedule import learning_rate
from aiayn.train.state import TrainerState, UpdateResult, Window
from aiayn.train.tasks import TrainingBatch, make_task

Validator = Callable[[nn.Module], Row]
"""Extra validation metrics from the model in eval mode, e.g. BLEU (wired in by the caller)."""


class TrainingError(AiaynError):
    """The run cannot go on (diverged, or a run directory in the way); said in one line."""


class Trainer:
    """Trains ``cfg`` into ``cfg.run.dir``. Use ``Trainer(cfg).train()``.

    The run directory is locked for the trainer's life (one writer at a time). Progress and
    news go to ``reporter`` (by default the ``aiayn`` logger: the library prints nothing).

    ``release_memory`` hands the heap's free pages back to the kernel where the trainer's use
    of memory changes (an update that met a new batch shape; before and after validation).
    It is the allocator's policy, set where the process starts: the command line tunes the
    allocator to keep freed memory (``aiayn.memory.tune_allocator``) and passes
    ``aiayn.memory.release_free_memory``; by default nothing (an allocator left as it is
    trims itself).
    """

    def __init__(
        self,
        cfg: TrainConfig,
        *,
        resume: bool = False,
        reporter: Reporter | None = None,
        validators: Sequence[Validator] = (),
        release_memory: Callable[[], None] = lambda: None,
        card: ModelCard | None = None,
    ):
        self.cfg = cfg
        self.release_memory = release_memory
        self.validators = list(validators)
        self.card = card or ModelCard()  # what the caller knows: the command, BLEU's signature
        self.criterion: Criterion = BY_BLEU if cfg.run.valid_bleu else BY_NLL
        self.run_dir = Path(cfg.run.dir)
        self.reporter = reporter or LoggingReporter()
        self.speed = SpeedWatch()
        self._planned = 0  # the update the time budget was last said to end the run at
        self.dist: Distributed = distributed_from_env()
        if self.dist.is_main:
            check_run_directory(self.run_dir)
        self.lock = RunLock(self.run_dir) if self.dist.is_main else None
        try:
            self._set_up(resume)
        except BaseException:
            self.close()
            raise
        # run.threads, else as many as the run started with, else the idle cores
        self.state.threads = cfg.run.threads or self.state.threads or idle_cores()
        torch.set_num_threads(self.state.threads)

    def _set_up(self, resume: bool) -> None:
        cfg = self.cfg
        self.device = select_device(cfg.run.device, local_rank=self.dist.local_rank)
        self.precision = resolve_precision(cfg.run.precision, self.device)
        if self.precision == "fp16" and self.device.type != "cuda":
            raise TrainingError('fp16 needs a GPU; use precision = "bf16" on CPU')
        init_distributed(self.dist, self.device, timeout_minutes=cfg.run.dist_timeout_minutes)
        self.task = make_task(cfg, self.dist, self.device)
        self.model_cfg = self.task.model_config(cfg.model)
        torch.manual_seed(cfg.run.seed)  # the same initial weights on every rank
        self.model = build_model(self.model_cfg, profile=cfg.run.profile).to(self.device)
        self.optimizer = make_optimizer(cfg, self.model, fused=self.model.profile.fused_optimizer)
        self.scaler = torch.amp.GradScaler(self.device.type, enabled=self.precision == "fp16")
        self.state = TrainerState()
        self._shapes_met: set[tuple[torch.Size, ...]] = set()
        self._prepare_run_dir(resume)
        self.loss_model = self.task.loss_module(self.model, epsilon=cfg.optim.label_smoothing)
        self.forward_model: nn.Module = self.loss_model
        if self.dist.enabled:
            self.forward_model = DistributedDataParallel(
                self.loss_model, **ddp_arguments(self.device)
            )
        if cfg.run.compile:
            self.forward_model = torch.compile(self.forward_model, dynamic=True)
        self.metrics = MetricsLog(
            self.run_dir, enabled=self.dist.is_main, resume_after=self.state.update
        )

    def log(self, message: str) -> None:
        if self.dist.is_main:
            self.reporter.log(message)

    def close(self) -> None:
        """Release the run directory (``train`` does at its end)."""
        metrics = getattr(self, "metrics", None)
        if metrics is not None:
            metrics.close()
        if self.lock is not None:
            self.lock.release()
            self.lock = None

    # -- set-up ---------------------------------------------------------------------------

    def _prepare_run_dir(self, resume: bool) -> None:
        if list_checkpoints(self.run_dir) and not resume:
            raise TrainingError(
                f"{self.run_dir} already has checkpoints: pass --resume to continue it, "
                "or choose another run.dir"
            )
        if resume:
            self._resume()
        if self.state.update == 0 and self.cfg.run.init_from:
            self._start_from(Path(self.cfg.run.init_from))
        if self.state.update == 0:  # a fresh run reads its whole dataset once
            self.task.verify_data()
        if self.dist.is_main:
            resolved = json.dumps(config_to_dict(self.cfg), indent=2)
            (self.run_dir / "config.json").write_text(resolved)

    def _start_from(self, directory: Path) -> None:
        """Fine-tuning: the weights of ``directory``; the optimiser and schedule stay fresh."""
        saved = check_init_from(directory, self.model_cfg, self.task.tokenizers())
        load_init_weights(self.model, directory, saved, self.device)
        self.log(f"starting from the weights of {directory} (a fresh optimiser and schedule)")

    def _resume(self) -> None:
        def same_model_and_data(path: Path) -> None:
            check_same_architecture(read_model_config(path), self.model_cfg, where=self.run_dir)
            check_same_vocabularies(path, self.task.tokenizers(), where=self.run_dir)

        restored = restore_newest(
            self.run_dir,
            model=self.model,
            optimizer=self.optimizer,
            check=same_model_and_data,
            warn=self.log,
        )
        if restored is None:
            self.log(f"no checkpoint in {self.run_dir}: starting from scratch")
            return
        path, saved = restored
        self.state = TrainerState.restored(saved, valid_bleu=self.cfg.run.valid_bleu)
        self.task.load_data_state(self.state.data)
        self.log(f"resumed from {path} (update {self.state.update})")

    # -- the loop -------------------------------------------------------------------------

    def train(self) -> TrainerState:
        """Train until a stopping rule says stop; save and validate the last update."""
        try:
            return self._train()
        finally:
            self.reporter.close()
            self.close()

    def _train(self) -> TrainerState:
        run = self.cfg.run
        if warning := emulated_bfloat16_warning(self.precision, self.device):
            self.log(warning)
        self.log(
            f"training {sum(p.numel() for p in self.model.parameters()):,} parameters "
            f"on {self.device} ({self.dist.world_size} process(es), {self.precision}, "
            f"{self.model.profile.name} profile, {torch.get_num_threads()} CPU thread(s))"
        )
        if self.cfg.run.init_from and self.state.update == 0:
            self._score_start()
        self.window = Window()
        first_update = self.state.update
        while not self._should_stop():
            result = self._update()
            self.window.add(result)
            row = None
            if self.state.update % run.log_every == 0:
                row = self._report(self.window)
                self.window = Window()
            if self.dist.is_main:
                self.reporter.progress(self.state.update, run.max_updates, row)
            other_work = time.perf_counter()
            if self.state.update % run.valid_every == 0 and self._validate():
                break
            if self.state.update % run.save_every == 0:
                self.save()
            self.window.excluded += time.perf_counter() - other_work
        if self.window.updates:
            self._report(self.window)
        finished_before = self.state.update == first_update  # resumed after its last update
        if self.state.update % run.save_every != 0 and not finished_before:
            self.save()
        if self.state.update % run.valid_every != 0 and not finished_before:
            self._validate()
        return self.state

    def _should_stop(self) -> bool:
        run = self.cfg.run
        self.state.progress = self._progress()
        if self.state.update >= run.max_updates:
            return True
        if run.max_epochs and self.task.epoch >= run.max_epochs:
            return True
        if self.state.progress >= 1.0:  # the time budget: every rank stops at the same update
            self.log(f"time budget of {run.max_minutes:g} minutes used: stopping")
            return True
        return False

    def _progress(self) -> float:
        """The run's share of its budget spent, the same on every rank (``budget_share``:
        the slowest rank's clock)."""
        run, state = self.cfg.run, self.state
        seconds = state.train_seconds + self.window.seconds
        share, timed = budget_share(state.update, run.max_updates, seconds, run.max_minutes)
        if timed is not None and self.dist.enabled:
            timed = float(
                all_reduce(torch.tensor(timed), self.dist, self.device, op=dist.ReduceOp.MAX)
            )
        return share if timed is None else max(share, timed)

    def _plan(self) -> None:
        """Log where the time budget will end the run at the speed so far: from the first
        report, then whenever that moves by more than 5%."""
        run, state = self.cfg.run, self.state
        plan = planned_end(state.update, state.train_seconds, run.max_updates, run.max_minutes)
        if plan is None or (self._planned and abs(plan[0] - self._planned) <= 0.05 * self._planned):
            return
        self._planned = plan[0]
        for line in plan_lines(*plan, run.max_updates, self.cfg.optim.warmup_steps):
            self.log(line)

    def _update(self) -> UpdateResult:
        """One optimiser step over ``update_freq`` batches (gradient accumulation)."""
        cfg = self.cfg
        self.model.train()
        update = self.state.update + 1
        torch.manual_seed(mixed_seed(cfg.run.seed, self.dist.rank, update))
        batches = [self.task.next_batch() for _ in range(cfg.optim.update_freq)]
        local_tokens = sum(b.n_tgt_tokens for b in batches)
        tokens = int(all_reduce(torch.tensor(float(local_tokens)), self.dist, self.device).item())
        # Gradients are summed over micro-batches and ranks, then divided by the target
        # tokens of the whole update (DDP averages over ranks, hence × world size).
        scale = self.dist.world_size / max(tokens, 1)
        loss_sum = torch.zeros((), device=self.device)
        nll_sum = torch.zeros((), device=self.device)
        for i, batch in enumerate(batches):
            last = i == len(batches) - 1
            with (
                no_sync_unless_last(self.forward_model, self.dist, last),
                autocast(self.precision, self.device),
            ):
                loss, nll = self.forward_model(*batch.model_inputs)
                self.scaler.scale(loss * scale).backward()
            loss_sum += loss.detach()
            nll_sum += nll.detach()
        totals = all_reduce(torch.stack([loss_sum, nll_sum]), self.dist, self.device)
        finite = bool(torch.isfinite(totals).all())
        if finite:
            self._step(update)
            self.state.nonfinite_in_row = 0
        else:
            self._skip_nonfinite(update)
        self.optimizer.zero_grad(set_to_none=True)
        self._release_heap_after_new_shapes(batches)
        self.state.update = update
        self.state.tokens += tokens
        self.state.data = self.task.data_state()
        return UpdateResult(float(totals[0]), float(totals[1]), tokens, finite)

    def _release_heap_after_new_shapes(self, batches: list[TrainingBatch]) -> None:
        """Hand the heap's free pages back (``release_memory``) after an update that met a
        batch shape for the first time.

        Why: the tuned allocator keeps what is freed, and each new shape leaves holes that
        later steps of known shapes no longer touch. Shapes stop being new after an epoch or
        so (11 in the Multi30k recipe), and with them the calls. Measured: 300 updates of
        that recipe peak at 1,214-1,339 MiB instead of 1,607 (``bench/long_run.py measure``).
        """
        shapes = {tuple(t.shape for t in b.model_inputs) for b in batches}
        if shapes <= self._shapes_met:
            return
        self._shapes_met |= shapes
        self.release_memory()

    def _step(self, update: int) -> None:
        cfg = self.cfg
        lr = learning_rate(
            update,
            cfg.optim,
            d_model=self.model_cfg.d_model,
            max_updates=cfg.run.max_updates,
            progress=self.state.progress,
            peak_progress=self.state.peak_progress,
        )
        if update == cfg.optim.warmup_steps:  # the budget schedule decays from here
            self.state.peak_progress = self.state.progress
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

    def _report(self, window: Window) -> Row:
        lr = self.optimizer.param_groups[0]["lr"]
        rss, peak = memory_mb()
        row = window.summary() | {
            Metric.LR: lr,
            Metric.EPOCH: self.task.epoch,
            Metric.RSS_MB: rss,
            Metric.PEAK_RSS_MB: peak,
        }
        self.state.train_seconds += window.seconds
        self.metrics.write(Kind.TRAIN, self.state.update, row)
        self.log(train_message(self.state.update, row))
        if warning := self.speed.check(row[Metric.TOKENS_PER_S], torch.get_num_threads()):
            self.log(warning)
        self._plan()
        return row

    @torch.no_grad()
    def validate(self) -> Row:
        """Validation loss and the validators' metrics. Free heap pages are handed back
        before and after, so that validation's batch shapes do not add to training's."""
        self.release_memory()
        self.model.eval()
        sums = Window()
        for batch in self.task.valid_batches():
            with autocast(self.precision, self.device):
                loss, nll = self.loss_model(*batch.model_inputs)
            sums.add(UpdateResult(float(loss), float(nll), batch.n_tgt_tokens, finite=True))
        row = sums.losses()
        for validator in self.validators:
            row |= validator(self.model)
        self.model.train()
        self.release_memory()
        return row

    def _score_start(self) -> None:
        """A fine-tuning run's starting model on the validation set, logged (not kept as
        the best: the run's own models are), for its later validations to be compared with."""
        row = self.validate()
        self.log(valid_message(0, row, best=False) + " (the starting model, before fine-tuning)")

    def _validate(self) -> bool:
        """Validate, keep the best model; True when early stopping says stop."""
        row = self.validate()
        self.metrics.write(Kind.VALID, self.state.update, row)
        better = self.state.record_validation(self.criterion, row[self.criterion.metric])
        if better and self.dist.is_main:
            save_model(
                self.model,
                self.model_cfg,
                self.run_dir / "best",
                assets=self.task.assets(),
                card=self._card(row),
            )
        self.log(valid_message(self.state.update, row, best=better))
        patience = self.cfg.run.patience
        if patience and self.state.stale_validations >= patience:
            self.log(f"early stop: no improvement in {patience} validations")
            return True
        return False

    def _card(self, row: Row) -> ModelCard:
        """The model card of the model as it is now, validated with ``row``."""
        state, criterion = self.state, self.criterion.metric.value
        return trained_card(self.card, self.cfg, state.update, state.tokens, criterion, row)

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
