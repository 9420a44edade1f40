"""Shared fixtures: tiny models on CPU, and the shared corpora (skipped with a reason if absent).

The suite runs in parallel (``bash scripts/test.sh``: pytest-xdist): what a session fixture
trains is built once per run for all workers (``built_once``).
"""

from __future__ import annotations

import hashlib
import os
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest
import torch
from filelock import FileLock

from aiayn.config import ModelConfig, PrepareConfig
from aiayn.data import prepare
from aiayn.models import build_model

from .data.corpora import make_corpus

REPO_ROOT = Path(__file__).resolve().parents[1]

# Under pytest-xdist the workers share the cores: one thread each (more only contend).
WORKER = os.environ.get("PYTEST_XDIST_WORKER")
torch.set_num_threads(1 if WORKER else min(2, torch.get_num_threads()))


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


def built_once(tmp_path_factory, name: str, key: object, build: Callable[[Path], None]) -> Path:
    """The directory ``build(directory)`` makes, made once per test run for every xdist
    worker: the first to ask builds it under a file lock, the others wait and read it.

    ``key`` is everything the build depends on (its configuration); it names the directory, so
    builds of different configurations never meet. Readers must not change the directory.
    """
    root = tmp_path_factory.getbasetemp()
    if WORKER:  # the workers' temporary directories share this run's parent
        root = root.parent
    digest = hashlib.sha256(repr(key).encode()).hexdigest()[:16]
    directory = root / "built-once" / f"{name}-{digest}"
    directory.parent.mkdir(parents=True, exist_ok=True)
    done = directory.with_name(directory.name + ".done")
    with FileLock(str(directory) + ".lock"):
        if not done.is_file():
            shutil.rmtree(directory, ignore_errors=True)  # a build that failed half-way
            build(directory)
            done.touch()
    return directory


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


def pytest_configure(config: pytest.Config) -> None:
    """Under ``--dist loadgroup`` the workers take the units of work (a group, else a test)
    in the order of the collection (``pytest_collection_modifyitems`` puts the slow ones
    first), not pytest-xdist's own order by number of tests."""
    if hasattr(config.option, "loadscopereorder"):
        config.option.loadscopereorder = False


@pytest.hookimpl(tryfirst=True)  # before pytest-xdist reads the groups
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Tests marked ``gpu`` are skipped where CUDA is not available. The tests of a module
    that share a module-scoped fixture (a server, a built site) form one xdist group: under
    ``--dist loadgroup`` they run on one worker, so the fixture is made once."""
    skip = pytest.mark.skip(reason="needs CUDA (marked gpu)")
    for item in items:
        if item.get_closest_marker("gpu") is not None and not torch.cuda.is_available():
            item.add_marker(skip)
        if _uses_module_fixture(item) and item.get_closest_marker("xdist_group") is None:
            item.add_marker(pytest.mark.xdist_group(item.nodeid.split("::")[0]))
    if getattr(config.option, "loadgroup", False):  # set on the workers by pytest-xdist
        _slow_units_first(items)


def _slow_units_first(items: list[pytest.Item]) -> None:
    """Order the units of work that the workers take one by one (an xdist group, else a
    test): those with the most tests marked ``slow`` first, then the other groups, largest
    first, then the single tests. The longest work starts at once, and the many short
    tests at the end keep every worker busy to the last, none waiting on another's long
    unit."""
    units: dict[str, list[pytest.Item]] = {}
    for item in items:
        group = item.get_closest_marker("xdist_group")  # named as pytest-xdist names it
        name = (group.args[0] if group.args else group.kwargs.get("name")) if group else None
        units.setdefault(f"@{name}" if group else item.nodeid, []).append(item)

    def order(unit: list[pytest.Item]) -> tuple[int, bool, int]:
        slow = sum(item.get_closest_marker("slow") is not None for item in unit)
        grouped = unit[0].get_closest_marker("xdist_group") is not None
        return -slow, not grouped, -len(unit)

    items[:] = [item for unit in sorted(units.values(), key=order) for item in unit]


def _uses_module_fixture(item: pytest.Item) -> bool:
    info = getattr(item, "_fixtureinfo", None)
    if info is None:
        return False
    return any(
        definitions[-1].scope in ("module", "class", "package")
        for name in info.names_closure
        if (definitions := info.name2fixturedefs.get(name))
    )


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


TINY_DATASET = dict(train=600, vocab_size=60)


def _prepare_tiny_dataset(root: Path) -> None:
    paths = make_corpus(root / "corpus", train=TINY_DATASET["train"])
    cfg = PrepareConfig(
        src_lang="src",
        tgt_lang="tgt",
        train=paths["train"],
        valid=paths["valid"],
        test=(paths["test"],),
        vocab_size=TINY_DATASET["vocab_size"],
    )
    prepare(cfg, root / "data")


@pytest.fixture(scope="session")
def tiny_dataset(tmp_path_factory) -> Path:
    return built_once(tmp_path_factory, "train-data", TINY_DATASET, _prepare_tiny_dataset) / "data"


TRAINED = dict(
    run={"max_updates": 400, "valid_every": 200, "save_every": 200}, model={"dropout": 0.0}
)


@pytest.fixture(scope="session")
def trained_model_dir(tiny_dataset, tmp_path_factory) -> Path:
    """A tiny translator trained on ``tiny_dataset`` for 400 updates (it has learned to
    reverse short sentences), as the model directory training writes."""
    from aiayn.train import Trainer

    from .train.conftest import config_dict, tiny_train_config

    def train(root: Path) -> None:
        Trainer(tiny_train_config(tiny_dataset, root / "run", **TRAINED)).train()

    key = (TINY_DATASET, config_dict(Path("data"), Path("run"), **TRAINED))
    return built_once(tmp_path_factory, "trained", key, train) / "run" / "best"


def copy_task():
    """``examples/copy_task.py`` as a module."""
    import importlib.util

    spec = importlib.util.spec_from_file_location(
        "copy_task", REPO_ROOT / "examples" / "copy_task.py"
    )
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="session")
def copy_task_weights(tmp_path_factory) -> Path:
    """The weights ``examples/copy_task.py`` trains (400 steps), trained once per run."""
    module = copy_task()

    def train(directory: Path) -> None:
        directory.mkdir()
        torch.save(module.train(log_every=0).state_dict(), directory / "model.pt")

    source = (REPO_ROOT / "examples" / "copy_task.py").read_text()
    return built_once(tmp_path_factory, "copy-task", source, train) / "model.pt"


def copy_task_model(weights: Path, *, profile: str = "fast"):
    """The copy-task model with ``weights``, in eval mode."""
    model = build_model(copy_task().CONFIG, profile=profile)
    model.load_state_dict(torch.load(weights, weights_only=True))
    return model.eval()
