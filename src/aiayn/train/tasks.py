"""What differs between training tasks: data, model vocabulary, the loss inputs, and the
files a trained model needs beside its weights."""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path
from typing import Protocol

import torch
from torch import Tensor, nn

from aiayn import masks
from aiayn.config import ModelConfig, TrainConfig
from aiayn.data import Batch, BatchIterator, CorpusError, TokenBatchSampler, collate, load_prepared
from aiayn.data.blocks import random_blocks, sequential_blocks
from aiayn.data.lm_stream import load_lm_data
from aiayn.data.tokenizer_files import (
    TOKENIZER_FILE,
    TokenizerInfo,
    describe_tokenizers,
    length_ratio_of,
    read_tokenizer_info,
    tokenizer_info_json,
)
from aiayn.errors import ConfigError
from aiayn.runtime import Distributed, mixed_seed


class TrainingBatch(Protocol):
    """What the training loop needs from a batch of any task."""

    @property
    def n_tgt_tokens(self) -> int: ...

    @property
    def model_inputs(self) -> tuple[Tensor, ...]: ...


class Task(Protocol):
    def model_config(self, model: ModelConfig) -> ModelConfig: ...

    def next_batch(self) -> TrainingBatch: ...

    def valid_batches(self) -> list[TrainingBatch]: ...

    def loss_module(self, model: nn.Module, *, epsilon: float) -> nn.Module: ...

    def assets(self) -> dict[str, bytes]: ...

    def tokenizers(self) -> tuple[Path, TokenizerInfo]:
        """The data's tokenizer files: their directory and description."""
        ...

    def data_state(self) -> dict[str, int]: ...

    def load_data_state(self, state: dict[str, int]) -> None: ...

    def verify_data(self) -> None:
        """Read the whole dataset and check it against its manifest's checksums."""
        ...

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
            pad_to_multiple=cfg.data.pad_to_multiple,
        )
        self.train = BatchIterator(
            train,
            sampler,
            num_shards=dist.world_size,
            shard=dist.rank,
            specials=self.data.specials,
        )
        self.valid = self.data.split(cfg.data.valid_split)
        self._valid_sampler = TokenBatchSampler(
            self.valid.src.lengths,
            self.valid.tgt.lengths,
            max_tokens=cfg.data.valid_max_tokens,
            shuffle=False,
            pad_to_multiple=cfg.data.pad_to_multiple,
        )

    def model_config(self, model: ModelConfig) -> ModelConfig:
        if not model.is_encoder_decoder:
            raise ConfigError(
                'task "translation" needs an encoder: set model.n_encoder_layers >= 1 '
                '(a decoder-only model is task = "lm")'
            )
        sizes = self.data.manifest["vocab"]["sizes"]
        if model.share_embeddings and sizes["src"] != sizes["tgt"]:
            model = replace(model, share_embeddings=False)
        return replace(model.with_vocab(sizes["src"], sizes["tgt"]), specials=self.data.specials)

    def next_batch(self) -> Batch:
        return self._checked(next(self.train)).to(self.device)

    def valid_batches(self) -> list[Batch]:
        sampler = self._valid_sampler
        return [
            self._checked(collate(self.valid, b, sampler.pad_to_multiple, self.data.specials)).to(
                self.device
            )
            for b in sampler.batches(0)
        ]

    def verify_data(self) -> None:
        self.data.verify()

    def _checked(self, batch: Batch) -> Batch:
        """``batch``, unless it holds ids outside the vocabularies (a damaged dataset)."""
        sizes = self.data.manifest["vocab"]["sizes"]
        for side, ids in (("src", batch.src), ("tgt", batch.tgt_out)):
            if int(ids.max()) >= sizes[side]:
                raise CorpusError(
                    f"{self.data.directory}: id {int(ids.max())} in the {side} of a batch, "
                    f"beyond the vocabulary of {sizes[side]}: the dataset is damaged"
                )
        return batch

    def loss_module(self, model: nn.Module, *, epsilon: float) -> nn.Module:
        return TranslationLoss(model, epsilon=epsilon)

    def assets(self) -> dict[str, bytes]:
        return _tokenizer_assets(*self.tokenizers())

    def tokenizers(self) -> tuple[Path, TokenizerInfo]:
        manifest = self.data.manifest
        if self.data.from_model:  # the model's tokenizers, this corpus's length ratio
            info = read_tokenizer_info(self.data.directory)
            ratio = length_ratio_of(manifest) or info.length_ratio
            return self.data.directory, replace(info, length_ratio=ratio)
        files = manifest["vocab"]["files"]
        info = describe_tokenizers(
            self.data.directory,
            files["src"],
            files["tgt"],
            src_lang=manifest["src_lang"],
            tgt_lang=manifest["tgt_lang"],
            pretokenized=manifest["pretokenized"],
            length_ratio=length_ratio_of(manifest),
        )
        return self.data.directory, info

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
        self.loss = model.profile.loss

    def forward(self, src: Tensor, tgt_in: Tensor, tgt_out: Tensor) -> tuple[Tensor, Tensor]:
        """Summed (label-smoothed loss, NLL) over the non-pad positions of ``tgt_out``."""
        model = self.model
        pad = model.specials.pad
        src_mask = model.source_mask(src)  # (B, 1, 1, S)
        memory = model.encode(src, src_mask)  # (B, S, D)
        tgt_mask = masks.decoder_self_mask(tgt_in, pad)  # (B, 1, T, T)
        hidden = model.decode(tgt_in, src_mask, memory=memory, tgt_mask=tgt_mask).hidden
        real = tgt_out != pad  # (B, T)
        return self.loss(hidden[real], model.output, tgt_out[real], epsilon=self.epsilon)


@dataclass(frozen=True)
class LMBatch:
    """Contiguous blocks of a token stream and the same blocks shifted by one."""

    inputs: Tensor  # (B, T)
    targets: Tensor  # (B, T)

    @property
    def n_tgt_tokens(self) -> int:
        return self.targets.numel()

    @property
    def model_inputs(self) -> tuple[Tensor, Tensor]:
        return self.inputs, self.targets


class LanguageModelTask:
    """Next-token prediction on a corpus from ``aiayn prepare --text`` (nanoGPT's setting:
    random contiguous blocks of ``block_size`` tokens, ``batch_size`` blocks a batch)."""

    def __init__(self, cfg: TrainConfig, dist: Distributed, device: torch.device):
        self.device = device
        self.data = load_lm_data(cfg.data.dir)
        self.train = self.data.stream(cfg.data.train_split)
        self.valid = self.data.stream(cfg.data.valid_split)
        self.block_size = cfg.data.block_size
        self.batch_size = cfg.data.batch_size
        self.n_valid_batches = cfg.data.valid_batches
        self.seed = cfg.run.seed
        self.rank = dist.rank
        self.position = 0  # batches drawn so far by this rank

    def model_config(self, model: ModelConfig) -> ModelConfig:
        if model.is_encoder_decoder:
            raise ConfigError('task "lm" is decoder-only: set model.n_encoder_layers = 0')
        if model.positional == "learned" and model.max_positions < self.block_size:
            raise ConfigError(
                f"model.max_positions ({model.max_positions}) is shorter than "
                f"data.block_size ({self.block_size})"
            )
        vocab = self.data.tokenizer.vocab_size
        return model.with_vocab(vocab, vocab)

    def next_batch(self) -> LMBatch:
        seed = mixed_seed(self.seed, self.rank, self.position)
        self.position += 1
        generator = torch.Generator().manual_seed(seed)
        x, y = random_blocks(
            self.train, block_size=self.block_size, batch_size=self.batch_size, generator=generator
        )
        return LMBatch(x.to(self.device), y.to(self.device))

    def valid_batches(self) -> list[LMBatch]:
        """``data.valid_batches`` random batches (the same ones every time), or with 0 the
        whole validation split in consecutive blocks."""
        if self.n_valid_batches:
            generator = torch.Generator().manual_seed(self.seed)
            pairs = [
                random_blocks(
                    self.valid,
                    block_size=self.block_size,
                    batch_size=self.batch_size,
                    generator=generator,
                )
                for _ in range(self.n_valid_batches)
            ]
        else:
            pairs = list(
                sequential_blocks(
                    self.valid, block_size=self.block_size, batch_size=self.batch_size
                )
            )
        return [LMBatch(x.to(self.device), y.to(self.device)) for x, y in pairs]

    def loss_module(self, model: nn.Module, *, epsilon: float) -> nn.Module:
        return LanguageModelLoss(model, epsilon=epsilon)

    def assets(self) -> dict[str, bytes]:
        return _tokenizer_assets(*self.tokenizers())

    def tokenizers(self) -> tuple[Path, TokenizerInfo]:
        name = self.data.manifest["tokenizer"]
        return self.data.directory, describe_tokenizers(self.data.directory, name, name)

    def data_state(self) -> dict[str, int]:
        return {"epoch": self.epoch, "position": self.position}

    def load_data_state(self, state: dict[str, int]) -> None:
        self.position = int(state["position"])

    def verify_data(self) -> None:
        self.data.verify()

    @property
    def epoch(self) -> int:
        return self.position * self.batch_size * self.block_size // max(len(self.train), 1)


class LanguageModelLoss(nn.Module):
    """TransformerLM + fused projection and loss over every position of the blocks."""

    def __init__(self, model: nn.Module, *, epsilon: float):
        super().__init__()
        self.model = model
        self.epsilon = epsilon
        self.loss = model.profile.loss

    def forward(self, inputs: Tensor, targets: Tensor) -> tuple[Tensor, Tensor]:
        hidden = self.model.decode(inputs).hidden  # (B, T, D)
        return self.loss(
            hidden.flatten(0, 1), self.model.output, targets.flatten(), epsilon=self.epsilon
        )


def _tokenizer_assets(directory: Path, info: TokenizerInfo) -> dict[str, bytes]:
    """The tokenizer files and their ``tokenizer.json``, to go into every model directory."""
    assets = {name: (directory / name).read_bytes() for name in info.files}
    assets[TOKENIZER_FILE] = tokenizer_info_json(info).encode()
    return assets


TASKS = {"translation": TranslationTask, "lm": LanguageModelTask}


def make_task(cfg: TrainConfig, dist: Distributed, device: torch.device) -> Task:
    return TASKS[cfg.task](cfg, dist, device)
