"""Fine-tuning: a run that starts from the weights of an existing model directory
(``run.init_from``), after checking that the config and the data fit that model."""

from __future__ import annotations

import dataclasses
from pathlib import Path

from torch import nn

from aiayn.config import ModelConfig
from aiayn.data.tokenizer_files import TokenizerInfo, read_tokenizer_info
from aiayn.errors import AiaynError
from aiayn.store.model_dir import WEIGHTS_FILE, load_weights, read_model_config
from aiayn.train.run_dir import NON_ARCHITECTURE_FIELDS

# fields the data decides: a mismatch means the data was not encoded with the model's tokenizers
DATA_FIELDS = {"src_vocab_size", "tgt_vocab_size", "specials", "share_embeddings"}
PREPARE_HINT = "prepare the data with its tokenizers: aiayn prepare --vocab-from {}"


class InitFromError(AiaynError):
    """A model to start from that the config or the data do not fit."""


def check_init_from(
    directory: Path, model: ModelConfig, data: tuple[Path, TokenizerInfo]
) -> ModelConfig:
    """The ModelConfig stored in ``directory``, after checking that ``model`` (the config
    with the data's vocabularies) has its architecture, and that the data was encoded with
    its tokenizer files.

    Raises:
        InitFromError: naming the first field that differs, or the tokenizer file.
        ModelLoadError, TokenizerError: ``directory`` is not a usable model directory.
    """
    saved = read_model_config(directory)
    for field in dataclasses.fields(ModelConfig):
        if field.name in NON_ARCHITECTURE_FIELDS:
            continue
        before, now = getattr(saved, field.name), getattr(model, field.name)
        if before != now:
            hint = (
                PREPARE_HINT.format(directory)
                if field.name in DATA_FIELDS
                else f"remove model.{field.name} from the config, or set it to {before!r}"
            )
            raise InitFromError(
                f"run.init_from {directory}: its model.{field.name} is {before!r}, the config "
                f"and data make it {now!r} ({hint})"
            )
    _check_same_tokenizers(directory, read_tokenizer_info(directory), data)
    return saved


def _check_same_tokenizers(
    directory: Path, model: TokenizerInfo, data: tuple[Path, TokenizerInfo]
) -> None:
    """The data's tokenizer files must be the model's, byte for byte (same ids, same pieces)."""
    data_dir, info = data
    pairs = [("source", model.src_file, info.src_file), ("target", model.tgt_file, info.tgt_file)]
    if model.src_vocab_file or info.src_vocab_file:
        pairs += [
            ("source", model.src_vocab_file, info.src_vocab_file),
            ("target", model.tgt_vocab_file, info.tgt_vocab_file),
        ]
    for side, ours, theirs in pairs:
        if model.sha256.get(ours) != info.sha256.get(theirs):
            raise InitFromError(
                f"run.init_from {directory}: the data {data_dir} was encoded with another "
                f"{side} tokenizer ({theirs or 'none'}, not the model's {ours}); "
                + PREPARE_HINT.format(directory)
            )


def load_init_weights(model: nn.Module, directory: Path, saved: ModelConfig, device) -> None:
    """Load the weights of the model directory ``directory`` into ``model``."""
    load_weights(model, directory / WEIGHTS_FILE, device=str(device), config=saved)
