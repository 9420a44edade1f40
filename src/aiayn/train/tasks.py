"""What differs between training tasks: data, model vocabulary, the loss inputs, and the
files a trained model needs beside its weights."""

from __future__ import annotations

import json
from dataclasses import replace
from typing import Protocol

import torch
from torch import Tensor, nn

from aiayn.config import PAD_ID, ModelConfig, TrainConfig
from aiayn.data import Batch, BatchIterator, TokenBatchSampler, collate, load_prepared
from aiayn.models.io import TOKENIZER_FILE
from aiayn.runtime import Distributed
from aiayn.train.loss import fused_label_smoothed_nll


class Task(Protocol):
    def model_config(self, model: ModelConfig) -> ModelConfig: ...

    def next_batch(self) -> Batch: ...

    def valid_batches(self) -> list[Batch]: ...

    def loss_module(self, model: nn.Module, *, epsilon: float) -> nn.Module: ...

    def assets(self) -> dict[str, bytes]: ...

    def data_state(self) -> dict[str, int]: ...

    def load_data_state(self, state: dict[str, int]) -> None: ...

    @property
    def epoch(self) -> int: ...


class TranslationTask:
    """Sequence-to-sequence training on a dataset from ``aiayn prepare``."""

    def __init__(self, cfg: TrainConfig, dist: Distributed, device: torch.device):
        self.device = device
        self.data = load_prepared(cfg.data.dir)
        train = self.data.split(cfg.data.train_split)
        sampler = TokenBatchSampler(
            train.src.lengths,
            train.tgt.lengths,
            max_tokens=cfg.data.max_tokens,
            seed=cfg.run.seed,
            max_sentences=cfg.data.max_sentences or None,
        )
        self.train = BatchIterator(train, sampler, num_shards=dist.world_size, shard=dist.rank)
        self.valid = self.data.split(cfg.data.valid_split)
        self._valid_sampler = TokenBatchSampler(
            self.valid.src.lengths,
            self.valid.tgt.lengths,
            max_tokens=cfg.data.valid_max_tokens,
            shuffle=False,
        )

    def model_config(self, model: ModelConfig) -> ModelConfig:
        sizes = self.data.manifest["vocab"]["sizes"]
        if model.share_embeddings and sizes["src"] != sizes["tgt"]:
            model = replace(model, share_embeddings=False)
        return model.with_vocab(sizes["src"], sizes["tgt"])

    def next_batch(self) -> Batch:
        return next(self.train).to(self.device)

    def valid_batches(self) -> list[Batch]:
        return [collate(self.valid, b).to(self.device) for b in self._valid_sampler.batches(0)]

    def loss_module(self, model: nn.Module, *, epsilon: float) -> nn.Module:
        return TranslationLoss(model, epsilon=epsilon)

    def assets(self) -> dict[str, bytes]:
        manifest = self.data.manifest
        files = manifest["vocab"]["files"]
        description = {
            "type": "sentencepiece",
            "src": files["src"],
            "tgt": files["tgt"],
            "src_lang": manifest["src_lang"],
            "tgt_lang": manifest["tgt_lang"],
            "pretokenized": manifest["pretokenized"],
        }
        assets = {name: (self.data.directory / name).read_bytes() for name in set(files.values())}
        assets[TOKENIZER_FILE] = json.dumps(description, indent=2).encode()
        return assets

    def data_state(self) -> dict[str, int]:
        return self.train.state_dict()

    def load_data_state(self, state: dict[str, int]) -> None:
        self.train.load_state_dict(state)

    @property
    def epoch(self) -> int:
        return self.train.epoch


class TranslationLoss(nn.Module):
    """Model + fused projection and label-smoothed loss over the real target tokens.

    It is the module data parallelism wraps, since DDP synchronises gradients only through
    a module's ``forward``.
    """

    def __init__(self, model: nn.Module, *, epsilon: float):
        super().__init__()
        self.model = model
        self.epsilon = epsilon

    def forward(self, src: Tensor, tgt_in: Tensor, tgt_out: Tensor) -> tuple[Tensor, Tensor]:
        """Summed (label-smoothed loss, NLL) over the non-pad positions of ``tgt_out``."""
        hidden = self.model.decoder_states(src, tgt_in)  # (B, T, D)
        real = tgt_out != PAD_ID  # (B, T)
        return fused_label_smoothed_nll(
            hidden[real], self.model.output.proj.weight, tgt_out[real], epsilon=self.epsilon
        )


TASKS = {"translation": TranslationTask}


def make_task(cfg: TrainConfig, dist: Distributed, device: torch.device) -> Task:
    return TASKS[cfg.task](cfg, dist, device)
