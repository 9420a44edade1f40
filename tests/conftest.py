"""Shared fixtures: tiny models on CPU, and the shared corpora (skipped with a reason if absent)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import torch

from aiayn.config import ModelConfig, PrepareConfig
from aiayn.data import prepare
from aiayn.models import build_model

from .data.corpora import make_corpus

REPO_ROOT = Path(__file__).resolve().parents[1]

torch.set_num_threads(min(2, torch.get_num_threads()))


def data_dir() -> Path:
    return Path(os.environ.get("AIAYN_DATA_DIR", REPO_ROOT.parent / "shared" / "data"))


@pytest.fixture
def multi30k_dir() -> Path:
    path = data_dir() / "multi30k"
    if not (path / "train.en.gz").is_file():
        pytest.skip(f"Multi30k not found at {path} (set AIAYN_DATA_DIR)")
    return path


@pytest.fixture
def shakespeare_file() -> Path:
    path = data_dir() / "tinyshakespeare" / "input.txt.gz"
    if not path.is_file():
        pytest.skip(f"tinyshakespeare not found at {path} (set AIAYN_DATA_DIR)")
    return path


@pytest.fixture
def seedpairs_dir() -> Path:
    """The open English-Korean and English-Portuguese evaluation sets (FLORES-200, NTREX-128,
    Tatoeba, Korean news)."""
    path = data_dir() / "seedpairs"
    if not (path / "flores200" / "devtest.ko.gz").is_file():
        pytest.skip(f"seedpairs not found at {path} (set AIAYN_DATA_DIR)")
    return path


def tiny_config(**overrides) -> ModelConfig:
    """The HF-Marian-style tester size: small enough for exhaustive checks in milliseconds."""
    fields = dict(
        src_vocab_size=37,
        tgt_vocab_size=37,
        d_model=32,
        n_heads=4,
        d_ff=64,
        n_encoder_layers=2,
        n_decoder_layers=2,
        dropout=0.0,
    )
    fields.update(overrides)
    return ModelConfig(**fields)


PROFILES = ["reference", "fast"]


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Tests marked ``gpu`` are skipped where CUDA is not available."""
    if torch.cuda.is_available():
        return
    skip = pytest.mark.skip(reason="needs CUDA (marked gpu)")
    for item in items:
        if item.get_closest_marker("gpu") is not None:
            item.add_marker(skip)


@pytest.fixture(params=PROFILES)
def profile(request) -> str:
    """Runs a test once with the paper's plain modules and once with the fast profile."""
    return request.param


def tiny_model(seed: int = 0, *, profile: str = "fast", **overrides):
    torch.manual_seed(seed)
    return build_model(tiny_config(**overrides), profile=profile).eval()


def random_tokens(
    batch: int, length: int, vocab: int, *, pad_from: list[int] | None = None, seed: int = 0
) -> torch.Tensor:
    """(batch, length) ids in [4, vocab); row i padded (id 0) from position pad_from[i]."""
    g = torch.Generator().manual_seed(seed)
    ids = torch.randint(4, vocab, (batch, length), generator=g)
    for row, start in enumerate(pad_from or []):
        ids[row, start:] = 0
    return ids


@pytest.fixture(scope="session")
def tiny_dataset(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("train-data")
    paths = make_corpus(root / "corpus", train=600)
    cfg = PrepareConfig(
        src_lang="src",
        tgt_lang="tgt",
        train=paths["train"],
        valid=paths["valid"],
        test=(paths["test"],),
        vocab_size=60,
    )
    prepare(cfg, root / "data")
    return root / "data"


@pytest.fixture(scope="session")
def trained_model_dir(tiny_dataset, tmp_path_factory) -> Path:
    """A tiny translator trained on ``tiny_dataset`` for 400 updates (it has learned to
    reverse short sentences), as the model directory training writes."""
    from aiayn.train import Trainer

    from .train.conftest import tiny_train_config

    run = tmp_path_factory.mktemp("trained") / "run"
    cfg = tiny_train_config(
        tiny_dataset,
        run,
        run={"max_updates": 400, "valid_every": 200, "save_every": 200},
        model={"dropout": 0.0},
    )
    Trainer(cfg).train()
    return run / "best"
