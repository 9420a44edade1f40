"""Real processes: a run killed with SIGKILL and resumed, and torchrun data parallelism."""

import os
import signal
import socket
import subprocess
import sys
import time

import pytest
import torch
from safetensors.torch import load_file

from aiayn.train import list_checkpoints

from .conftest import config_dict, train_losses, write_toml

CLI = [sys.executable, "-m", "aiayn"]
ENV = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONUNBUFFERED": "1"}


RESUMED_UPDATES = 120  # killed after update 20: the resumed run crosses an epoch's end


def _weights(run_dir):
    return load_file(str(list_checkpoints(run_dir)[-1] / "model.safetensors"))


@pytest.mark.slow
def test_resume_after_sigkill_ends_with_bitwise_identical_weights(tiny_dataset, tmp_path, profile):
    run = {
        "profile": profile,
        "max_updates": RESUMED_UPDATES,
        "save_every": 10,
        "keep_last": 2,
        "valid_every": 1000,
        "log_every": 50,
    }
    straight = write_toml(
        tmp_path / "a.toml", config_dict(tiny_dataset, tmp_path / "straight", run=run)
    )
    killed = write_toml(
        tmp_path / "b.toml", config_dict(tiny_dataset, tmp_path / "killed", run=run)
    )
    subprocess.run([*CLI, "train", str(straight)], check=True, env=ENV, capture_output=True)

    proc = subprocess.Popen(
        [*CLI, "train", str(killed)], env=ENV, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    deadline = time.monotonic() + 120
    while not (tmp_path / "killed" / "checkpoints" / "step_00000020").exists():
        assert proc.poll() is None and time.monotonic() < deadline, "run ended before the kill"
        time.sleep(0.005)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    last = list_checkpoints(tmp_path / "killed")[-1].name
    assert last < f"step_{RESUMED_UPDATES:08d}", f"killed too late: {last}"

    resumed = subprocess.run(
        [*CLI, "train", str(killed), "--resume"], env=ENV, capture_output=True, text=True
    )
    assert resumed.returncode == 0, resumed.stderr
    assert "resumed from" in resumed.stderr
    a, b = _weights(tmp_path / "straight"), _weights(tmp_path / "killed")
    assert a.keys() == b.keys()
    for name in a:
        assert torch.equal(a[name], b[name]), name


ACCUMULATION = {
    "max_updates": 8,
    "log_every": 1,
    "valid_every": 100,
    "save_every": 100,
    "device": "cpu",  # gloo on the CPU, also where GPUs (fewer than processes) exist
}


@pytest.fixture(scope="module")
def one_process_run(tiny_dataset, tmp_path_factory):
    """A one-process run with twice the accumulation, run once for both tests that compare
    two processes with it."""
    root = tmp_path_factory.mktemp("accumulation")
    single = write_toml(
        root / "one.toml",
        config_dict(
            tiny_dataset,
            root / "one",
            run=ACCUMULATION,
            model={"dropout": 0.0},
            optim={"update_freq": 2},
        ),
    )
    subprocess.run([*CLI, "train", str(single)], check=True, env=ENV, capture_output=True)
    return root / "one"


def _two_processes_config(dataset, tmp_path):
    """The config for the two processes, each with half the accumulation."""
    values = config_dict(dataset, tmp_path / "two", run=ACCUMULATION, model={"dropout": 0.0})
    return write_toml(tmp_path / "two.toml", values)


def _assert_same_training(one_dir, two_dir):
    one, two = train_losses(one_dir), train_losses(two_dir)
    assert len(one) == len(two) == 8  # rank 0 alone writes the log
    assert one == pytest.approx(two, rel=1e-5)
    a, b = _weights(one_dir), _weights(two_dir)
    for name in a:
        torch.testing.assert_close(a[name], b[name], rtol=1e-4, atol=1e-5)


TORCHRUN = [sys.executable, "-m", "torch.distributed.run"]
needs_distributed = pytest.mark.skipif(
    not torch.distributed.is_available(), reason="torch.distributed missing"
)


@pytest.mark.slow
@needs_distributed
def test_two_processes_equal_one_process_with_twice_the_accumulation(
    tiny_dataset, tmp_path, one_process_run
):
    double = _two_processes_config(tiny_dataset, tmp_path)
    ddp = subprocess.run(
        [*TORCHRUN, "--standalone", "--nproc_per_node=2", "-m", "aiayn", "train", str(double)],
        env=ENV,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert ddp.returncode == 0, ddp.stderr[-3000:]
    assert "2 process(es)" in ddp.stderr
    _assert_same_training(one_process_run, tmp_path / "two")


@pytest.mark.slow
@needs_distributed
def test_two_machines_equal_one_process_with_twice_the_accumulation(
    tiny_dataset, tmp_path, one_process_run
):
    """``torchrun --nnodes 2`` on 127.0.0.1: two "machines" of one process each, gloo."""
    double = _two_processes_config(tiny_dataset, tmp_path)
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    nodes = [
        subprocess.Popen(
            [
                *TORCHRUN,
                "--nnodes=2",
                f"--node_rank={rank}",
                "--nproc_per_node=1",
                "--master_addr=127.0.0.1",
                f"--master_port={port}",
                "-m",
                "aiayn",
                "train",
                str(double),
            ],
            env=ENV,
            stderr=subprocess.PIPE,
            text=True,
        )
        for rank in (0, 1)
    ]
    errors = [node.communicate(timeout=300)[1] for node in nodes]
    assert [node.returncode for node in nodes] == [0, 0], errors[0][-2000:] + errors[1][-2000:]
    assert "2 process(es)" in errors[0]
    _assert_same_training(one_process_run, tmp_path / "two")
