"""Checkpoints that survive crashes, and checkpoint averaging (§6.1).

A checkpoint is a directory ``RUN/checkpoints/step_NNNNNNNN`` that is also a model directory
(``config.json``, ``model.safetensors`` and the tokenizer files), plus ``optimizer.safetensors``
and ``trainer.json`` (update number, data-iterator position, counters). It is written under a
temporary name and renamed, so a crash mid-write never damages the last good checkpoint.
No pickle is used anywhere.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from typing import Any

import torch
from safetensors import safe_open
from safetensors.torch import load_file, save_file
from torch import nn

from aiayn.config import ModelConfig
from aiayn.models.io import WEIGHTS_FILE, ModelLoadError, load_model, load_weights, save_model

CHECKPOINTS = "checkpoints"
OPTIMIZER_FILE = "optimizer.safetensors"
TRAINER_FILE = "trainer.json"
PREFIX = "step_"


def checkpoint_dir(run_dir: str | Path, update: int) -> Path:
    return Path(run_dir) / CHECKPOINTS / f"{PREFIX}{update:08d}"


def list_checkpoints(run_dir: str | Path) -> list[Path]:
    """Complete checkpoints of a run, oldest first."""
    root = Path(run_dir) / CHECKPOINTS
    if not root.is_dir():
        return []
    return sorted(p for p in root.iterdir() if p.is_dir() and p.name.startswith(PREFIX))


def write_model_dir(
    directory: Path, model: nn.Module, cfg: ModelConfig, assets: dict[str, bytes]
) -> None:
    """A model directory: weights, config and the files (tokenizers) it needs to be used."""
    save_model(model, cfg, directory)
    for name, content in assets.items():
        (directory / name).write_bytes(content)


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
    """Write the checkpoint of ``update`` atomically and delete all but the last ``keep_last``."""
    final = checkpoint_dir(run_dir, update)
    tmp = final.with_name(f".tmp-{final.name}")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    write_model_dir(tmp, model, cfg, assets)
    tensors, meta = _flatten_optimizer(optimizer.state_dict())
    save_file(tensors, str(tmp / OPTIMIZER_FILE), metadata={"meta": json.dumps(meta)})
    (tmp / TRAINER_FILE).write_text(json.dumps(trainer_state, indent=2))
    if final.exists():
        shutil.rmtree(final)
    os.replace(tmp, final)
    for old in list_checkpoints(run_dir)[:-keep_last] if keep_last > 0 else []:
        shutil.rmtree(old, ignore_errors=True)
    return final


def load_checkpoint(
    path: str | Path, *, model: nn.Module, optimizer: torch.optim.Optimizer
) -> dict[str, Any]:
    """Restore model and optimiser from a checkpoint; return its trainer state."""
    path = Path(path)
    load_weights(model, path / WEIGHTS_FILE)
    tensors = load_file(str(path / OPTIMIZER_FILE))
    with safe_open(str(path / OPTIMIZER_FILE), framework="pt") as f:
        meta = json.loads(f.metadata()["meta"])
    optimizer.load_state_dict(_unflatten_optimizer(tensors, meta))
    return json.loads((path / TRAINER_FILE).read_text())


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
    return model, cfg


def copy_assets(model_dir: Path) -> dict[str, bytes]:
    """The non-weight files of a model directory (tokenizers), to carry into another."""
    skip = {WEIGHTS_FILE, "config.json", OPTIMIZER_FILE, TRAINER_FILE}
    return {
        p.name: p.read_bytes() for p in model_dir.iterdir() if p.is_file() and p.name not in skip
    }
