"""Model directories: ``config.json`` + ``model.safetensors`` (no pickle) + the files the
model needs to be used (tokenizers), written atomically and loaded with one call.

``config.json`` records the size and SHA-256 of ``model.safetensors`` (``"weights"``), checked
whenever the weights are read, and no weight may be NaN or infinite: a flipped bit, a
truncated copy or a diverged model is refused with one line naming the file (and the
tensor). Other files a model directory may carry (a model card) are not covered: the
tokenizers have their own checksums in ``tokenizer.json``."""

from __future__ import annotations

import json
import logging
import os
from pathlib import Path

import torch
from safetensors import SafetensorError, safe_open
from safetensors.torch import load_model as _load_safetensors
from safetensors.torch import save_model as _save_safetensors
from torch import nn

from aiayn.accel import Profile
from aiayn.config import ModelConfig
from aiayn.config_io import config_from_dict, config_to_dict
from aiayn.data.tokenizer_files import TOKENIZER_FILE, TokenizerInfo
from aiayn.errors import AiaynError, ConfigError
from aiayn.files import sha256_file, write_directory
from aiayn.runtime import select_device
from aiayn.store.card import CARD_FILE, ModelCard, render_card

CONFIG_FILE = "config.json"
WEIGHTS_FILE = "model.safetensors"
TRAINING_STATE_FILE = "trainer.json"  # only in training checkpoints, never replaced here
SAVED_WITH = "aiayn_model_config"  # safetensors metadata: the ModelConfig of the weights
FORMAT = "aiayn-model"
LOGGER = logging.getLogger("aiayn")
FORMAT_VERSION = 1


class ModelLoadError(AiaynError):
    """A model directory that cannot be loaded: missing, corrupted or mismatched files."""


def write_model_files(directory: Path, model: nn.Module, cfg: ModelConfig) -> None:
    """Write ``config.json`` and ``model.safetensors`` into an existing directory; the
    weights carry the config they were saved with, and ``config.json`` their checksum, both
    checked when they are loaded."""
    weights = directory / WEIGHTS_FILE
    saved_with = {SAVED_WITH: json.dumps(config_to_dict(cfg), sort_keys=True)}
    _save_safetensors(model, str(weights), metadata=saved_with)
    config = {
        "format": FORMAT,
        "version": FORMAT_VERSION,
        "model": config_to_dict(cfg),
        "weights": {"file": WEIGHTS_FILE, **file_checksum(weights)},
    }
    (directory / CONFIG_FILE).write_text(json.dumps(config, indent=2) + "\n")


def file_checksum(path: Path) -> dict[str, int | str]:
    return {"size": path.stat().st_size, "sha256": sha256_file(path)}


def save_model(
    model: nn.Module,
    cfg: ModelConfig,
    directory: str | Path,
    *,
    assets: dict[str, bytes] | None = None,
    replace: bool = True,
    card: ModelCard | None = None,
) -> Path:
    """Write the model directory ``directory`` whole, or not at all, with its model card
    (``README.md``).

    Args:
        assets: further files (name -> content), e.g. the tokenizers.
        replace: replace an existing model directory there. Nothing else is ever replaced:
            not a training checkpoint, not a directory aiayn did not write.
        card: what the caller knows of the model's making (data, command, scores, licence).
    """
    with write_directory(
        directory, replace=replace, replaceable=is_model_directory, what="model directory"
    ) as tmp:
        write_model_files(tmp, model, cfg)
        for name, content in (assets or {}).items():
            (tmp / name).write_bytes(content)
        (tmp / CARD_FILE).write_text(_card_text(model, cfg, assets or {}, card), "utf-8")
    return Path(directory)


def _card_text(
    model: nn.Module, cfg: ModelConfig, assets: dict[str, bytes], card: ModelCard | None
) -> str:
    try:
        tokenizer = TokenizerInfo(**json.loads(assets[TOKENIZER_FILE]))
    except (KeyError, ValueError, TypeError):
        tokenizer = None
    parameters = sum(p.numel() for p in model.parameters())  # tied weights once
    return render_card(card or ModelCard(), cfg, parameters=parameters, tokenizer=tokenizer)


def is_model_directory(path: Path) -> bool:
    """A model directory aiayn wrote (a training checkpoint is not one: it is never replaced
    by a model)."""
    if (path / TRAINING_STATE_FILE).exists():
        return False
    try:
        return json.loads((path / CONFIG_FILE).read_text()).get("format") == FORMAT
    except (OSError, ValueError, AttributeError):
        return False


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


def load_model(
    directory: str | Path, *, device: str = "cpu", profile: str | Profile | None = None
) -> tuple[nn.Module, ModelConfig]:
    """Rebuild the model stored in ``directory`` (with ``profile``'s parts) and load its weights.

    Raises:
        ModelLoadError: the directory, config or weights are missing, corrupted, or do not
            match each other.
        DeviceError: ``device`` does not exist here.
    """
    from aiayn.models import build_model

    if not isinstance(directory, str | os.PathLike):
        raise ModelLoadError(f"a model directory is a path, got {type(directory).__name__}")
    select_device(str(device))  # one that does not exist here is one line, not a deep error
    cfg = read_model_config(directory)
    model = build_model(cfg, profile=profile)
    load_weights(model, Path(directory) / WEIGHTS_FILE, device=device, config=cfg)
    model.eval()
    return model, cfg


def load_weights(
    model: nn.Module, path: Path, *, device: str = "cpu", config: ModelConfig | None = None
) -> None:
    """Load a safetensors file into ``model``; every tensor must fit (tied weights allowed),
    and with ``config``, the weights must have been saved with that architecture.

    Raises:
        ModelLoadError: the file is missing or corrupted, or does not match the model.
    """
    if not path.is_file():
        raise ModelLoadError(f"{path}: not found")
    verify_weights(path)
    try:
        with safe_open(str(path), framework="pt") as f:
            saved_with = (f.metadata() or {}).get(SAVED_WITH)
            shapes = {name: list(f.get_slice(name).get_shape()) for name in f.keys()}  # noqa: SIM118
    except (SafetensorError, OSError) as e:
        raise ModelLoadError(f"{path}: corrupted or not a safetensors file ({e})") from None
    if config is not None and saved_with is not None:
        _check_saved_with(path, json.loads(saved_with), config)
    expected = {name: list(t.shape) for name, t in model.state_dict().items()}
    for name, shape in shapes.items():
        if name in expected and expected[name] != shape:
            raise ModelLoadError(
                f"{path}: {name} has shape {shape}, {CONFIG_FILE} makes it {expected[name]}"
            )
    try:
        missing, unexpected = _load_safetensors(model, str(path), strict=False, device=device)
    except (SafetensorError, OSError, RuntimeError) as e:
        raise ModelLoadError(
            f"{path}: cannot be loaded ({' '.join(str(e).split())[:200]})"
        ) from None
    if missing or unexpected:
        raise ModelLoadError(
            f"{path}: weights do not match {CONFIG_FILE}: "
            f"missing {sorted(missing)[:5]}, unexpected {sorted(unexpected)[:5]}"
        )
    check_finite(model.state_dict(), where=path)


def verify_weights(path: Path) -> None:
    """Check a weights file against the size and SHA-256 that the ``config.json`` beside it
    records (model directories written before checksums were recorded are not checked: a
    warning on the ``aiayn`` logger says so).

    Raises:
        ModelLoadError: the file differs from what was saved.
    """
    try:
        recorded = json.loads((path.parent / CONFIG_FILE).read_text()).get("weights")
    except (OSError, ValueError, AttributeError):
        return  # no readable config beside the weights: read_model_config reports it
    if not isinstance(recorded, dict) or recorded.get("file") != path.name:
        LOGGER.warning(
            f"{path}: {CONFIG_FILE} records no checksum of it (a model directory written "
            "before checksums were recorded, or an edited one): the weights are not verified"
        )
        return
    size = path.stat().st_size
    if size != recorded.get("size"):
        raise ModelLoadError(
            f"{path}: corrupted: {size} bytes, saved with {recorded.get('size')} "
            "(truncated or replaced)"
        )
    if sha256_file(path) != recorded.get("sha256"):
        raise ModelLoadError(
            f"{path}: corrupted: changed since it was saved (checksum differs from {CONFIG_FILE}'s)"
        )


def check_finite(tensors: dict[str, torch.Tensor], *, where: Path | str) -> None:
    """Refuse weights holding NaN or an infinity (a diverged model, a damaged file).

    Raises:
        ModelLoadError: naming the file and the first tensor that is not finite.
    """
    for name, tensor in tensors.items():
        if tensor.is_floating_point() and not bool(torch.isfinite(tensor).all()):
            bad = int((~torch.isfinite(tensor)).sum())
            raise ModelLoadError(
                f"{where}: {name} holds {bad} non-finite value{'s' * (bad > 1)} (NaN or inf); "
                "these weights cannot be used"
            )


def _check_saved_with(path: Path, saved: dict, config: ModelConfig) -> None:
    """Refuse weights saved with another architecture than ``config.json`` now describes
    (same shapes, other function: an activation or position layout edited by hand)."""
    current = config_to_dict(config)
    for name, value in current.items():
        if name in saved and saved[name] != value:
            raise ModelLoadError(
                f"{path.parent / CONFIG_FILE}: model.{name} is {value!r}, but the weights "
                f"were saved with {saved[name]!r}"
            )
