"""Faults around runs and writes: two trainers on one run directory, a damaged newest
checkpoint, a full disk while saving, a prepare killed half-way, file permissions."""

from __future__ import annotations

import errno
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from aiayn.cli import main
from aiayn.train import Trainer, list_checkpoints
from aiayn.train import checkpoint as checkpoint_module
from aiayn.train.metrics import METRICS_FILE

from .data.corpora import sentences, write_lines
from .train.conftest import Messages, config_dict, tiny_train_config, write_toml

CLI = [sys.executable, "-m", "aiayn"]
ENV = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONUNBUFFERED": "1"}


def _wait_for(path: Path, proc: subprocess.Popen, seconds: float = 120) -> None:
    deadline = time.monotonic() + seconds
    while not path.exists():
        assert proc.poll() is None, "the process ended before the moment of the fault"
        assert time.monotonic() < deadline, f"{path} never appeared"
        time.sleep(0.01)


def test_a_second_trainer_on_the_same_run_directory_is_refused(tiny_dataset, tmp_path):
    run = {"max_updates": 100_000, "save_every": 100_000, "valid_every": 100_000}
    toml = write_toml(tmp_path / "c.toml", config_dict(tiny_dataset, tmp_path / "run", run=run))
    first = subprocess.Popen([*CLI, "train", str(toml)], env=ENV, stderr=subprocess.PIPE)
    try:
        _wait_for(tmp_path / "run" / METRICS_FILE, first)
        second = subprocess.run(
            [*CLI, "train", str(toml), "--resume"], env=ENV, capture_output=True, text=True
        )
        assert second.returncode == 2
        [line] = second.stderr.strip().splitlines()
        assert "in use by another training process" in line and f"PID {first.pid}" in line
    finally:
        first.kill()
        first.wait()
    again = subprocess.run(  # the kernel released the lock with the killed process
        [*CLI, "train", str(toml), "--set", "run.max_updates=3"],
        env=ENV,
        capture_output=True,
        text=True,
    )
    assert again.returncode == 0, again.stderr


@pytest.mark.parametrize("damaged", ["optimizer.safetensors", "trainer.json", "model.safetensors"])
def test_resume_skips_a_damaged_newest_checkpoint(tiny_dataset, tmp_path, damaged):
    run = {"max_updates": 12, "save_every": 4, "keep_last": 5, "valid_every": 100}
    Trainer(tiny_train_config(tiny_dataset, tmp_path / "run", run=run)).train()
    newest = list_checkpoints(tmp_path / "run")[-1]
    path = newest / damaged
    path.write_bytes(path.read_bytes()[: path.stat().st_size // 2])
    messages = Messages()
    cfg = tiny_train_config(tiny_dataset, tmp_path / "run", run={**run, "max_updates": 16})
    state = Trainer(cfg, resume=True, reporter=messages).train()
    assert any(f"skipping damaged checkpoint {newest.name}" in m and damaged in m for m in messages)
    assert any("resumed from" in m and "step_00000008" in m for m in messages)
    assert state.update == 16


def test_a_full_disk_while_saving_keeps_the_previous_checkpoint(
    tiny_dataset, tmp_path, monkeypatch, capsys
):
    run = {"max_updates": 12, "save_every": 4, "valid_every": 100}
    toml = write_toml(tmp_path / "c.toml", config_dict(tiny_dataset, tmp_path / "run", run=run))
    real = checkpoint_module.save_file
    calls = []

    def full_disk(*args, **kwargs):
        calls.append(1)
        if len(calls) == 2:
            raise OSError(errno.ENOSPC, "No space left on device")
        return real(*args, **kwargs)

    monkeypatch.setattr(checkpoint_module, "save_file", full_disk)
    assert main(["train", str(toml)]) == 2
    [line] = [x for x in capsys.readouterr().err.splitlines() if "error" in x]
    assert "the disk is full" in line and "step_00000008" in line
    checkpoints = tmp_path / "run" / "checkpoints"
    assert [p.name for p in list_checkpoints(tmp_path / "run")] == ["step_00000004"]
    assert not [p for p in checkpoints.iterdir() if p.name.startswith(".")]  # no temporaries
    monkeypatch.setattr(checkpoint_module, "save_file", real)
    assert main(["train", str(toml), "--resume"]) == 0
    assert "resumed from" in capsys.readouterr().err


def _tmpfs(path: Path, size: str) -> bool:
    path.mkdir()
    if os.geteuid() != 0 or shutil.which("mount") is None:
        return False
    mounted = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(path)], capture_output=True
    )
    return mounted.returncode == 0


def test_a_real_full_disk_while_saving(tiny_dataset, tmp_path):
    disk = tmp_path / "disk"
    if not _tmpfs(disk, "1500k"):
        pytest.skip("cannot mount a small tmpfs here (needs root and mount)")
    try:
        run = {"max_updates": 40, "save_every": 4, "keep_last": 100, "valid_every": 100}
        toml = write_toml(tmp_path / "c.toml", config_dict(tiny_dataset, disk / "run", run=run))
        done = subprocess.run([*CLI, "train", str(toml)], env=ENV, capture_output=True, text=True)
        assert done.returncode == 2, done.stderr[-500:]
        last = done.stderr.strip().splitlines()[-1]
        assert "error:" in last and "disk is full" in last
        kept = list_checkpoints(disk / "run")
        assert kept, "at least the first checkpoint fitted"
        checkpoint_module.verify_checkpoint(kept[-1])  # the last one kept is intact
        assert not list((disk / "run" / "checkpoints").glob(".*"))
    finally:
        subprocess.run(["umount", str(disk)], capture_output=True)


@pytest.mark.slow
def test_a_prepare_killed_half_way_leaves_nothing_that_looks_complete(tmp_path):
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    lines = sentences(60_000, min_len=8, max_len=30)
    for split, n in (("train", 60_000), ("valid", 50)):
        write_lines(corpus / f"{split}.src", lines[:n])
        write_lines(corpus / f"{split}.tgt", lines[:n])
    argv = [
        "prepare",
        "--src-lang",
        "src",
        "--tgt-lang",
        "tgt",
        "--train",
        str(corpus / "train"),
        "--valid",
        str(corpus / "valid"),
        "--vocab-size",
        "60",
        "--out",
        str(tmp_path / "data"),
    ]
    proc = subprocess.Popen([*CLI, *argv], env=ENV, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 60
    while not list(tmp_path.glob(".data.tmp-*/spm.model")):
        assert proc.poll() is None and time.monotonic() < deadline, "prepare ended too soon"
        time.sleep(0.005)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    assert not (tmp_path / "data").exists()
    assert list(tmp_path.glob(".data.tmp-*"))  # what the killed process left
    done = subprocess.run([*CLI, *argv], env=ENV, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert json.loads((tmp_path / "data" / "manifest.json").read_text())["splits"]["train"]
    assert not list(tmp_path.glob(".data.*"))  # cleaned up by the next run


def test_files_get_the_umasks_permissions(tiny_dataset, tmp_path):
    old = os.umask(0o022)
    try:
        run = {"max_updates": 4, "save_every": 4, "valid_every": 4}
        Trainer(tiny_train_config(tiny_dataset, tmp_path / "run", run=run)).train()
    finally:
        os.umask(old)
    for path in [*(tmp_path / "run" / "best").iterdir(), *list_checkpoints(tmp_path / "run")]:
        assert path.stat().st_mode & 0o777 in (0o644, 0o755), path
