"""A tiny prepared dataset and a tiny training config for the training tests."""

from __future__ import annotations

import json
from pathlib import Path

from aiayn.config_io import train_config_from_dict

TINY_MODEL = dict(
    d_model=32, n_heads=4, d_ff=64, n_encoder_layers=2, n_decoder_layers=2, dropout=0.1
)


def config_dict(dataset: Path, run_dir: Path, **sections) -> dict:
    values = {
        "model": dict(TINY_MODEL),
        "data": {"dir": str(dataset), "max_tokens": 256},
        "optim": {"schedule": "inverse_sqrt", "lr": 0.003, "warmup_steps": 10},
        "run": {
            "dir": str(run_dir),
            "max_updates": 12,
            "log_every": 4,
            "valid_every": 6,
            "save_every": 6,
            "threads": 1,
            "seed": 3,
        },
    }
    for name, fields in sections.items():
        values[name] = {**values.get(name, {}), **fields}
    return values


def train_losses(run_dir: Path) -> list[float]:
    """The training loss of every logged update, from the run's ``metrics.jsonl``."""
    rows = [json.loads(line) for line in (run_dir / "metrics.jsonl").open()]
    return [r["loss"] for r in rows if r["kind"] == "train"]


def tiny_train_config(dataset: Path, run_dir: Path, **sections):
    return train_config_from_dict(config_dict(dataset, run_dir, **sections))


def write_toml(path: Path, values: dict) -> Path:
    lines = [f"{k} = {_toml_value(v)}" for k, v in values.items() if not isinstance(v, dict)]
    for section, fields in ((k, v) for k, v in values.items() if isinstance(v, dict)):
        lines.append(f"[{section}]")
        for key, value in fields.items():
            lines.append(f"{key} = {_toml_value(value)}")
    path.write_text("\n".join(lines) + "\n")
    return path


def _toml_value(value) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return f'"{value}"'
    return repr(value)


class Messages:
    """A reporter that keeps the trainer's messages."""

    def __init__(self):
        self.lines = []

    def __iter__(self):
        return iter(self.lines)

    def log(self, message):
        self.lines.append(message)

    def progress(self, *_):
        pass

    def close(self):
        pass
