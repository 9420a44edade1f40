"""Checkpoints that survive crashes, and checkpoint averaging (§6.1).

A checkpoint is a directory ``RUN/checkpoints/step_NNNNNNNN`` that is also a model directory
(``config.json``, ``model.safetensors`` and the tokenizer files), plus ``optimizer.safetensors``,
``trainer.json`` (update number, data-iterator position, counters) and ``checksums.json``
(size and SHA-256 of every other file). It is written whole or not at all
(``aiayn.files``); resuming verifies it against its checksums and falls back to the
newest intact one. No pickle is used anywhere.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch
from safetensors import SafetensorError, safe_open
from safetensors.torch import load_file, save_file
from torch import nn

from aiayn.config import ModelConfig
from aiayn.errors import AiaynError
from aiayn.files import sha256_file, write_directory
from aiayn.store.card import CARD_FILE, ModelCard, dataset_files
from aiayn.store.model_dir import (
    CONFIG_FILE,
    TRAINING_STATE_FILE,
    WEIGHTS_FILE,
    ModelLoadError,
    check_finite,
    load_model,
    load_weights,
    write_model_files,
)

CHECKPOINTS = "checkpoints"
OPTIMIZER_FILE = "optimizer.safetensors"
TRAINER_FILE = TRAINING_STATE_FILE
CHECKSUMS_FILE = "checksums.json"
PREFIX = "step_"


class CheckpointError(AiaynError):
    """A checkpoint that cannot be written or read back."""


def checkpoint_dir(run_dir: str | Path, update: int) -> Path:
    return Path(run_dir) / CHECKPOINTS / f"{PREFIX}{update:08d}"


def list_checkpoints(run_dir: str | Path) -> list[Path]:
    """Complete checkpoints of a run, oldest first."""
    root = Path(run_dir) / CHECKPOINTS
    if not root.is_dir():
        return []
    return sorted(p for p in root.iterdir() if p.is_dir() and p.name.startswith(PREFIX))


def checkpoint_progress(path: Path) -> float:
    """The share of its run's budget spent when checkpoint ``path`` was saved
    (``TrainerState.progress``; 0 for a checkpoint that predates it)."""
    return float(json.loads((path / TRAINER_FILE).read_text()).get("progress", 0.0))


def is_checkpoint(path: Path) -> bool:
    return path.name.startswith(PREFIX) and (path / TRAINER_FILE).is_file()


def save_checkpoint(
    run_dir: str | Path,
    update: int,
    *,
    model: nn.Module,
    cfg: ModelConfig,
    optimizer: torch.optim.Optimizer,
    trainer_state: dict[str, Any],
    assets: dict[str, bytes],
    keep_last: int,
) -> Path:
    """Write the checkpoint of ``update`` atomically, then delete all but the last ``keep_last``.

    Raises:
        CheckpointError: the disk is full (or another write error): the new checkpoint is
            not kept, and the previous ones are untouched.
    """
    final = checkpoint_dir(run_dir, update)
    with write_directory(
        final,
        replace=True,
        replaceable=is_checkpoint,
        error=CheckpointError,
        kept="the previous checkpoints are intact",
    ) as tmp:
        write_model_files(tmp, model, cfg)
        for name, content in assets.items():
            (tmp / name).write_bytes(content)
        tensors, meta = _flatten_optimizer(optimizer.state_dict())
        save_file(tensors, str(tmp / OPTIMIZER_FILE), metadata={"meta": json.dumps(meta)})
        (tmp / TRAINER_FILE).write_text(json.dumps(trainer_state, indent=2))
        _write_checksums(tmp)
    for old in list_checkpoints(run_dir)[:-keep_last] if keep_last > 0 else []:
        shutil.rmtree(old, ignore_errors=True)
    return final


def _write_checksums(directory: Path) -> None:
    files = sorted(p for p in directory.iterdir() if p.is_file())
    sums = {p.name: {"size": p.stat().st_size, "sha256": sha256_file(p)} for p in files}
    (directory / CHECKSUMS_FILE).write_text(json.dumps(sums, indent=2))


def verify_checkpoint(path: Path) -> None:
    """Check that every file of the checkpoint is there with the size and checksum it was
    saved with (a checkpoint of aiayn 0.1, without ``checksums.json``, is not checked).

    Raises:
        CheckpointError: a file is missing, truncated or changed (named in the message).
    """
    sums_path = path / CHECKSUMS_FILE
    if not sums_path.exists():
        return
    try:
        sums = json.loads(sums_path.read_text())
    except (OSError, ValueError) as e:
        raise CheckpointError(f"{sums_path}: unreadable ({e})") from None
    for name, expected in sums.items():
        file = path / name
        if not file.is_file():
            raise CheckpointError(f"{file}: missing")
        if file.stat().st_size != expected["size"]:
            raise CheckpointError(
                f"{file}: {file.stat().st_size} bytes, saved with {expected['size']}"
            )
        if sha256_file(file) != expected["sha256"]:
            raise CheckpointError(f"{file}: changed since it was saved (checksum differs)")


def restore_newest(
    run_dir: str | Path,
    *,
    model: nn.Module,
    optimizer: torch.optim.Optimizer,
    check: Callable[[Path], None] = lambda _: None,
    warn: Callable[[str], None] = lambda _: None,
) -> tuple[Path, dict[str, Any]] | None:
    """Restore the newest checkpoint that is intact (``verify_checkpoint``) and loads;
    damaged newer ones are skipped with a warning naming them. ``check`` may refuse a
    checkpoint (by raising) before it is loaded.

    Returns:
        Its path and trainer state, or None when the run has no checkpoint.

    Raises:
        CheckpointError: the run has checkpoints, and none is intact.
    """
    checkpoints = list_checkpoints(run_dir)
    for path in reversed(checkpoints):
        try:
            verify_checkpoint(path)
            check(path)
            return path, load_checkpoint(path, model=model, optimizer=optimizer)
        except CheckpointError as e:
            warn(f"skipping damaged checkpoint {path.name}: {e}")
    if checkpoints:
        raise CheckpointError(f"{run_dir}: no intact checkpoint to resume from")
    return None


def load_checkpoint(
    path: str | Path, *, model: nn.Module, optimizer: torch.optim.Optimizer
) -> dict[str, Any]:
    """Restore model and optimiser from a checkpoint; return its trainer state.

    Raises:
        CheckpointError: its files cannot be read or do not fit the model and optimiser.
    """
    path = Path(path)
    try:
        load_weights(model, path / WEIGHTS_FILE)
        tensors = load_file(str(path / OPTIMIZER_FILE))
        with safe_open(str(path / OPTIMIZER_FILE), framework="pt") as f:
            meta = json.loads(f.metadata()["meta"])
        optimizer.load_state_dict(_unflatten_optimizer(tensors, meta))
        return json.loads((path / TRAINER_FILE).read_text())
    except ModelLoadError as e:
        raise CheckpointError(str(e)) from None
    except (OSError, SafetensorError, ValueError, KeyError, TypeError) as e:
        raise CheckpointError(f"{path}: cannot be restored ({type(e).__name__}: {e})") from None


def _flatten_optimizer(state_dict: dict) -> tuple[dict[str, torch.Tensor], dict]:
    tensors: dict[str, torch.Tensor] = {}
    plain: dict[str, dict[str, Any]] = {}
    for index, state in state_dict["state"].items():
        for key, value in state.items():
            if isinstance(value, torch.Tensor):
                tensors[f"{index}.{key}"] = value.detach().contiguous().cpu()
            else:
                plain.setdefault(str(index), {})[key] = value
    return tensors, {"param_groups": state_dict["param_groups"], "plain": plain}


def _unflatten_optimizer(tensors: dict[str, torch.Tensor], meta: dict) -> dict:
    state: dict[int, dict[str, Any]] = {}
    for name, value in tensors.items():
        index, key = name.split(".", 1)
        state.setdefault(int(index), {})[key] = value
    for index, values in meta["plain"].items():
        state.setdefault(int(index), {}).update(values)
    return {"state": state, "param_groups": meta["param_groups"]}


# --8<-- [start:average_checkpoints]
def average_checkpoints(paths: list[Path]) -> tuple[nn.Module, ModelConfig]:
    """The element-wise mean of the weights of several checkpoints of one model (§6.1).

    Sums run in float64 so the result does not depend on the order of the checkpoints.
    """
    if not paths:
        raise ModelLoadError("no checkpoints to average")
    model, cfg = load_model(paths[0])
    params = dict(model.named_parameters())  # tied weights appear once
    sums = {name: p.detach().double().clone() for name, p in params.items()}
    for path in paths[1:]:
        other, other_cfg = load_model(path)
        if other_cfg != cfg:
            raise ModelLoadError(f"{path}: a different model from {paths[0]}; cannot average")
        for name, p in other.named_parameters():
            sums[name] += p.detach().double()
    with torch.no_grad():
        for name, p in params.items():
            p.copy_(sums[name] / len(paths))
    check_finite(dict(model.named_parameters()), where=f"the average of {len(paths)} models")
    return model, cfg


# --8<-- [end:average_checkpoints]


def averaged_card(paths: list[Path], command: str = "") -> ModelCard:
    """The model card of the average of ``paths``: its run's config and data, when the
    checkpoints are a run's."""
    run = paths[-1].parent.parent if paths[-1].parent.name == CHECKPOINTS else None
    config = None
    if run is not None:
        try:
            config = json.loads((run / "config.json").read_text())
        except (OSError, ValueError):
            config = None
    config = config if isinstance(config, dict) else None
    data = config.get("data", {}) if config else {}
    started_from = config.get("run", {}).get("init_from", "") if config else ""
    where = f" of the run in {run}" if run is not None else ""
    return ModelCard(
        origin=f"The average of the weights of {len(paths)} checkpoints "
        f"({paths[0].name} .. {paths[-1].name}){where} (§6.1).",
        command=command,
        config=config,
        started_from=started_from if isinstance(started_from, str) else "",
        data=dataset_files(data["dir"]) if isinstance(data, dict) and data.get("dir") else (),
    )


def model_assets(model_dir: Path) -> dict[str, bytes]:
    """The non-weight files of a model directory (tokenizers), to carry into another."""
    skip = {WEIGHTS_FILE, CONFIG_FILE, OPTIMIZER_FILE, TRAINER_FILE, CHECKSUMS_FILE, CARD_FILE}
    return {
        p.name: p.read_bytes() for p in model_dir.iterdir() if p.is_file() and p.name not in skip
    }
