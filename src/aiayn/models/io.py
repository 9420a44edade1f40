"""Model directories: ``config.json`` + ``model.safetensors`` (no pickle), loaded with one call."""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path

from safetensors import SafetensorError
from safetensors.torch import load_model as _load_safetensors
from safetensors.torch import save_model as _save_safetensors
from torch import nn

from aiayn.config import ConfigError, ModelConfig, config_from_dict, config_to_dict

CONFIG_FILE = "config.json"
WEIGHTS_FILE = "model.safetensors"
TOKENIZER_FILE = "tokenizer.json"  # which tokenizer files a model directory uses
FORMAT = "aiayn-model"
FORMAT_VERSION = 1


class ModelLoadError(RuntimeError):
    """A model directory that cannot be loaded: missing, corrupted or mismatched files."""


def save_model(model: nn.Module, cfg: ModelConfig, directory: str | Path) -> Path:
    """Write ``config.json`` and ``model.safetensors`` into ``directory`` (created if needed).

    Each file is written to a temporary name and renamed, so a crash never leaves a
    half-written file under the final name.
    """
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    config = {"format": FORMAT, "version": FORMAT_VERSION, "model": config_to_dict(cfg)}
    _atomic_write(directory / CONFIG_FILE, lambda p: p.write_text(json.dumps(config, indent=2)))
    _atomic_write(directory / WEIGHTS_FILE, lambda p: _save_safetensors(model, str(p)))
    return directory


def read_model_config(directory: str | Path) -> ModelConfig:
    """The ModelConfig stored in a model directory."""
    path = Path(directory) / CONFIG_FILE
    if not path.is_file():
        raise ModelLoadError(f"{path}: not found (is {directory} a model directory?)")
    try:
        data = json.loads(path.read_text())
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise ModelLoadError(f"{path}: not valid JSON ({e})") from None
    if not isinstance(data, dict) or data.get("format") != FORMAT:
        raise ModelLoadError(f'{path}: not an aiayn model config (no "format": "{FORMAT}")')
    if data.get("version") != FORMAT_VERSION:
        raise ModelLoadError(f"{path}: format version {data.get('version')} is not supported")
    try:
        return config_from_dict(ModelConfig, data["model"], where=str(path))
    except (ConfigError, KeyError) as e:
        raise ModelLoadError(str(e)) from None


def load_model(directory: str | Path, *, device: str = "cpu") -> tuple[nn.Module, ModelConfig]:
    """Rebuild the model stored in ``directory`` and load its weights.

    Raises:
        ModelLoadError: the directory, config or weights are missing, corrupted, or do not
            match each other.
    """
    from aiayn.models.build import build_model

    cfg = read_model_config(directory)
    model = build_model(cfg)
    load_weights(model, Path(directory) / WEIGHTS_FILE, device=device)
    model.eval()
    return model, cfg


def load_weights(model: nn.Module, path: Path, *, device: str = "cpu") -> None:
    """Load a safetensors file into ``model``; every tensor must fit (tied weights allowed).

    Raises:
        ModelLoadError: the file is missing or corrupted, or does not match the model.
    """
    if not path.is_file():
        raise ModelLoadError(f"{path}: not found")
    try:
        missing, unexpected = _load_safetensors(model, str(path), strict=False, device=device)
    except (SafetensorError, OSError) as e:
        raise ModelLoadError(f"{path}: corrupted or not a safetensors file ({e})") from None
    except RuntimeError as e:
        raise ModelLoadError(f"{path}: weights do not match {CONFIG_FILE}: {e}") from None
    if missing or unexpected:
        raise ModelLoadError(
            f"{path}: weights do not match {CONFIG_FILE}: "
            f"missing {sorted(missing)[:5]}, unexpected {sorted(unexpected)[:5]}"
        )


def _atomic_write(path: Path, write) -> None:
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    os.close(fd)
    tmp_path = Path(tmp)
    try:
        write(tmp_path)
        os.replace(tmp_path, path)
    finally:
        tmp_path.unlink(missing_ok=True)
