"""Device placement and ranks under torchrun, checked without GPUs."""

import pytest
import torch

from aiayn.runtime import (
    DeviceError,
    Distributed,
    ddp_arguments,
    distributed_from_env,
    select_device,
)


def test_each_local_rank_gets_its_own_gpu(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 4)
    for local_rank in range(4):
        for spec in ("auto", "cuda"):
            assert select_device(spec, local_rank=local_rank) == torch.device("cuda", local_rank)
    assert select_device("cuda:3", local_rank=1) == torch.device("cuda", 3)


def test_without_cuda_auto_is_the_cpu(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert select_device("auto", local_rank=2) == torch.device("cpu")


def test_ddp_pins_a_gpu_replica_to_its_device():
    assert ddp_arguments(torch.device("cuda", 2)) == {"device_ids": [2], "output_device": 2}
    assert ddp_arguments(torch.device("cpu")) == {}


def test_ranks_come_from_the_torchrun_environment():
    env = {"WORLD_SIZE": "8", "RANK": "5", "LOCAL_RANK": "1"}
    assert distributed_from_env(env) == Distributed(rank=5, world_size=8, local_rank=1)
    assert distributed_from_env({}) == Distributed()
    assert not distributed_from_env({}).enabled and distributed_from_env(env).enabled


def test_devices_that_do_not_exist_here_are_refused_in_one_line(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    for spec, words in [("tpu9", "unknown device"), ("mps", "not supported"), ("cuda", "CUDA")]:
        with pytest.raises(DeviceError, match=words):
            select_device(spec)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 2)
    with pytest.raises(DeviceError, match="2 GPU"):
        select_device("cuda:5")
