"""A run directory's guard: one training process at a time, and the checks before resuming.

The lock is an OS file lock (``filelock``: ``flock`` on POSIX, ``msvcrt.locking`` on
Windows) on ``RUN/.lock``, held for the life of the training process and released by the
kernel however it ends (even SIGKILL), so a stale lock can never block a later run.
"""

from __future__ import annotations

import dataclasses
import json
import os
from pathlib import Path

from filelock import FileLock, Timeout

from aiayn.config import ModelConfig
from aiayn.data.tokenizer import Tokenizer, load_tokenizer
from aiayn.data.tokenizer_files import TokenizerInfo, load_tokenizers
from aiayn.errors import AiaynError

LOCK_FILE = ".lock"
# ModelConfig fields a resumed run may change: regularisation, not the architecture.
NON_ARCHITECTURE_FIELDS = {"dropout", "attention_dropout", "activation_dropout"}


class RunDirectoryError(AiaynError):
    """A run directory that cannot be trained in now (in use, or incompatible)."""


class RunLock:
    """Holds ``RUN/.lock`` exclusively until ``release`` (or the process ends)."""

    def __init__(self, run_dir: Path):
        run_dir.mkdir(parents=True, exist_ok=True)
        self.path = run_dir / LOCK_FILE
        self._lock: FileLock | None = FileLock(self.path)
        try:
            self._lock.acquire(timeout=0)
        except Timeout:
            self._lock = None
            raise RunDirectoryError(
                f"{run_dir} is in use by another training process (PID {self._holder()}); "
                "wait for it to finish or choose another run.dir"
            ) from None
        self.path.write_text(f"{os.getpid()}\n", encoding="utf-8")  # for that message

    def _holder(self) -> str:
        try:
            return self.path.read_text(encoding="utf-8").strip() or "unknown"
        except OSError:  # Windows: the holder's lock covers the file
            return "unknown"

    def release(self) -> None:
        if self._lock is not None:
            self._lock.release()
            self._lock = None


SIGNATURES_FILE = "valid_signatures.txt"  # how validation was scored (aiayn.validation writes it)
RUN_FILES = (
    "checkpoints",
    "metrics.jsonl",
    "config.json",
    "best",
    "tensorboard",
    SIGNATURES_FILE,
    LOCK_FILE,
)


def check_run_directory(run_dir: Path) -> None:
    """Refuse a ``run.dir`` that holds files aiayn did not write (a run writes its config,
    logs and checkpoints there, and would overwrite a ``config.json`` of someone else's).

    Raises:
        RunDirectoryError: naming what is in the way.
    """
    if not run_dir.exists():
        return
    if not run_dir.is_dir():
        raise RunDirectoryError(f"run.dir {run_dir}: exists and is not a directory")
    foreign = sorted(p.name for p in run_dir.iterdir() if not _ours(p.name))
    config = run_dir / "config.json"
    if not foreign and config.is_file() and not _is_run_config(config):
        foreign = ["config.json"]
    if foreign:
        raise RunDirectoryError(
            f"run.dir {run_dir}: holds files aiayn did not write ({', '.join(foreign[:3])}); "
            "choose another run.dir"
        )


def is_run_directory(path: Path) -> bool:
    """A directory a training run writes (its checkpoints, metrics log or run config)."""
    return (
        (path / "checkpoints").is_dir()
        or (path / "metrics.jsonl").is_file()
        or _is_run_config(path / "config.json")
    )


def _ours(name: str) -> bool:
    """A file a run writes, or the temporary name of one being written."""
    return name in RUN_FILES or any(
        name.startswith(f".{ours}.{kind}-") for ours in RUN_FILES for kind in ("tmp", "old")
    )


def _is_run_config(path: Path) -> bool:
    try:
        return set(json.loads(path.read_text())) >= {"model", "data", "optim", "run"}
    except (OSError, ValueError, TypeError):
        return False


def check_same_architecture(saved: ModelConfig, current: ModelConfig, *, where: Path) -> None:
    """Refuse to resume ``where`` with a model whose architecture differs from the one saved.

    Raises:
        RunDirectoryError: naming the first differing field and both values.
    """
    for field in dataclasses.fields(ModelConfig):
        if field.name in NON_ARCHITECTURE_FIELDS:
            continue
        before, now = getattr(saved, field.name), getattr(current, field.name)
        if before != now:
            raise RunDirectoryError(
                f"{where} was trained with model.{field.name} = {before!r}, the config now "
                f"says {now!r}: resuming would load the weights into another architecture "
                "(choose another run.dir, or restore the setting)"
            )


def check_same_vocabularies(
    checkpoint: Path, data: tuple[Path, TokenizerInfo], *, where: Path
) -> None:
    """Refuse to resume ``where`` on data whose subword vocabularies differ from the ones
    ``checkpoint`` was trained with: its weights would read other subwords under the same ids
    (vocabularies of the same sizes pass ``check_same_architecture``). The pieces are compared,
    not the files, so the same data prepared again resumes.

    Raises:
        RunDirectoryError: naming the side and the first id whose piece differs.
    """
    saved_src, saved_tgt, _ = load_tokenizers(checkpoint)
    directory, info = data
    if info.kind == "marian":  # a dataset encoded with a Marian model's tokenizers
        src, tgt, _ = load_tokenizers(directory)
    else:
        src = load_tokenizer(directory / info.src_file)
        tgt = src if info.tgt_file == info.src_file else load_tokenizer(directory / info.tgt_file)
    for side, before, now in (("source", saved_src, src), ("target", saved_tgt, tgt)):
        if side == "target" and before is saved_src and now is src:
            continue  # joint vocabularies on both sides: the source's comparison holds
        old, new = _all_pieces(before), _all_pieces(now)
        if old == new:
            continue
        first = next(
            (i for i, (a, b) in enumerate(zip(old, new, strict=False)) if a != b),
            min(len(old), len(new)),
        )
        raise RunDirectoryError(
            f"{where} was trained on another {side} vocabulary than {directory}'s "
            f"({len(old)} pieces, now {len(new)}; id {first} differs): resuming would feed "
            "its weights other subwords (choose another run.dir, or the data it was trained on)"
        )


def _all_pieces(tokenizer: Tokenizer) -> list[str]:
    return tokenizer.pieces(range(tokenizer.vocab_size))
