"""Bad input and damaged files, command by command: every case must end with exit status 2 and
one line that says what is wrong (no traceback), and must lose nothing.

Each case is (name, set-up, argv, expected words). ``{w}`` in argv is a shared "world" of real
artifacts (a corpus, a prepared dataset, a trained run and model, a language model); ``{t}``
is the case's own temporary directory, where its set-up puts damaged copies.
"""

from __future__ import annotations

import gzip
import importlib.util
import io
import json
import shutil
import socket
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
import torch

from aiayn.cli import main
from aiayn.config import PrepareConfig
from aiayn.data import prepare
from aiayn.data.lm_stream import prepare_lm
from aiayn.train import list_checkpoints

from .data.corpora import make_corpus, sentences, write_lines
from .train.conftest import config_dict, write_toml

TEXT = "to be, or not to be, that is the question.\n" * 40


@pytest.fixture(scope="module")
def world(tmp_path_factory) -> Path:
    w = tmp_path_factory.mktemp("world")
    paths = make_corpus(w / "corpus", train=300)
    cfg = PrepareConfig(
        src_lang="src", tgt_lang="tgt", train=paths["train"], valid=paths["valid"], vocab_size=60
    )
    prepare(cfg, w / "data")
    run = {"max_updates": 12, "save_every": 6, "valid_every": 6, "log_every": 6}
    write_toml(w / "train.toml", config_dict(w / "data", w / "run", run=run))
    assert main(["train", str(w / "train.toml")]) == 0
    (w / "text.txt").write_text(TEXT)
    prepare_lm(w / "text.txt", w / "lmdata")
    lm = {
        "task": "lm",
        "model": {"d_model": 32, "n_heads": 4, "d_ff": 64, "n_encoder_layers": 0},
        "data": {"dir": str(w / "lmdata"), "block_size": 16, "batch_size": 4},
        "run": {"dir": str(w / "lmrun"), "max_updates": 6, "save_every": 6, "valid_every": 6},
    }
    (w / "lm.json").write_text(json.dumps(lm))
    write_toml(w / "lm.toml", lm)
    assert main(["train", str(w / "lm.toml")]) == 0
    _make_bad_files(w)
    return w


def _make_bad_files(w: Path) -> None:
    (w / "bad_utf8.txt").write_bytes(b"fine\nbad \xff\xfe byte\n")
    (w / "in.txt").write_text("the dog runs\na cat sleeps\n")
    (w / "ref1.txt").write_text("one line only\n")
    good = gzip.compress("".join(f"{s}\n" for s in sentences(200)).encode())
    bad = w / "bad"
    bad.mkdir()
    (bad / "train.src.gz").write_bytes(good[: len(good) // 2])  # truncated gzip
    (bad / "train.tgt.gz").write_bytes(good)
    write_lines(bad / "utf8.src", ["ok", "also ok"])
    (bad / "utf8.tgt").write_bytes(b"gut\nnicht \xc3\x28 gut\n")
    write_lines(bad / "counts.src", sentences(10))
    write_lines(bad / "counts.tgt", sentences(9))
    write_lines(bad / "empty.src", [])
    write_lines(bad / "empty.tgt", [])
    for name in ("valid.src", "valid.tgt"):
        write_lines(bad / name, sentences(5, seed=3))


def _copy(w: Path, t: Path, name: str) -> Path:
    shutil.copytree(w / name, t / name)
    return t / name


def _edit_json(path: Path, **changes) -> None:
    data = json.loads(path.read_text())
    node = data
    for key, value in changes.items():
        parts = key.split("__")
        for part in parts[:-1]:
            node = node[part]
        node[parts[-1]] = value
        node = data
    path.write_text(json.dumps(data))


def flip_bytes(path: Path, at: int = 40) -> None:
    raw = bytearray(path.read_bytes())
    raw[at] ^= 0xFF
    raw[at + 1] ^= 0xFF
    path.write_bytes(bytes(raw))


def truncate(path: Path, keep: float = 0.5) -> None:
    path.write_bytes(path.read_bytes()[: int(path.stat().st_size * keep)])


# -- set-ups: each damages a copy under {t} ------------------------------------------------


def model_with(**changes) -> Callable[[Path, Path], None]:
    def setup(w: Path, t: Path) -> None:
        _edit_json(_copy(w, t, "run/best") / "config.json", **changes)

    return setup


def damaged_model(name: str, damage: Callable[[Path], None]) -> Callable[[Path, Path], None]:
    def setup(w: Path, t: Path) -> None:
        damage(_copy(w, t, "run/best") / name)

    return setup


def _with_record(path: Path, record: dict) -> str:
    """``path``'s tokenizer.json with ``record`` as its source preprocessing."""
    return json.dumps({**json.loads(path.read_text()), "src_preprocessing": record})


def swapped_tokenizer(w: Path, t: Path) -> None:
    model = _copy(w, t, "run/best")
    spm = model / "spm.model"
    other = w / "lmdata" / "chars.json"
    spm.write_bytes(other.read_bytes()[: spm.stat().st_size].ljust(spm.stat().st_size, b" "))


def lm_as_translation_model(w: Path, t: Path) -> None:
    _copy(w, t, "lmrun/best")


def damaged_dataset(name: str, damage: Callable[[Path], None]) -> Callable[[Path, Path], None]:
    def setup(w: Path, t: Path) -> None:
        damage(_copy(w, t, "data") / name)
        write_toml(t / "train.toml", config_dict(t / "data", t / "run"))

    return setup


def dataset_manifest(w: Path, t: Path) -> None:
    data = _copy(w, t, "data")
    (data / "manifest.json").write_text("{ not json")
    write_toml(t / "train.toml", config_dict(t / "data", t / "run"))


def train_config(**sections) -> Callable[[Path, Path], None]:
    def setup(w: Path, t: Path) -> None:
        write_toml(t / "train.toml", config_dict(w / "data", t / "run", **sections))

    return setup


def resume_with(**model) -> Callable[[Path, Path], None]:
    def setup(w: Path, t: Path) -> None:
        shutil.copytree(w / "run", t / "run")
        write_toml(t / "train.toml", config_dict(w / "data", t / "run", model=model))

    return setup


def init_from(where: str, *, data: str = "data", **model) -> Callable[[Path, Path], None]:
    """A fine-tuning config: start from ``where`` ({w} and {t} filled in) on ``data``."""

    def setup(w: Path, t: Path) -> None:
        path = where.replace("{w}", str(w)).replace("{t}", str(t))
        values = config_dict(w / data, t / "run", run={"init_from": path})
        values["model"] = model
        write_toml(t / "train.toml", values)

    return setup


def other_vocabulary_data(w: Path, t: Path) -> None:
    """Data with its own vocabulary (not the model's), for a fine-tuning config."""
    paths = make_corpus(t / "corpus", train=100)
    cfg = PrepareConfig(
        src_lang="src", tgt_lang="tgt", train=paths["train"], valid=paths["valid"], vocab_size=50
    )
    prepare(cfg, t / "data")
    values = config_dict(t / "data", t / "run", run={"init_from": str(w / "run" / "best")})
    values["model"] = {}
    write_toml(t / "train.toml", values)


def foreign_directory(name: str) -> Callable[[Path, Path], None]:
    def setup(w: Path, t: Path) -> None:
        (t / name).mkdir()
        (t / name / "keep.txt").write_text("precious")
        write_toml(t / "train.toml", config_dict(w / "data", t / name))

    return setup


def corpus_as(src: str, tgt: str) -> Callable[[Path, Path], None]:
    """The world's corpus at ``{t}/c``, its files named for languages ``src`` and ``tgt``."""

    def setup(w: Path, t: Path) -> None:
        (t / "c").mkdir()
        for split in ("train", "valid"):
            shutil.copyfile(w / "corpus" / f"{split}.src", t / "c" / f"{split}.{src}")
            shutil.copyfile(w / "corpus" / f"{split}.tgt", t / "c" / f"{split}.{tgt}")

    return setup


def file_at(name: str, content: str = "x") -> Callable[[Path, Path], None]:
    def setup(w: Path, t: Path) -> None:
        (t / name).write_text(content)

    return setup


def metrics_with_garbage(w: Path, t: Path) -> None:
    run = _copy(w, t, "run")
    lines = (run / "metrics.jsonl").read_text().splitlines()
    (run / "metrics.jsonl").write_text("\n".join([lines[0], "garbage{", *lines[1:]]) + "\n")


def toml_text(text: str) -> Callable[[Path, Path], None]:
    def setup(w: Path, t: Path) -> None:
        (t / "train.toml").write_text(text)

    return setup


def recipe_text(text: str) -> Callable[[Path, Path], None]:
    def setup(w: Path, t: Path) -> None:
        (t / "recipe.toml").write_text(text)

    return setup


def no_keys(w: Path, t: Path) -> None:
    (t / "keys").write_text("# nobody\n\n")


def foreign_ct2(w: Path, t: Path) -> None:
    """A CTranslate2 model directory that also holds files a user put there."""
    (t / "ct2" / "sub").mkdir(parents=True)
    for name, text in (("model.bin", "old"), ("config.json", "{}"), ("notes.txt", "mine")):
        (t / "ct2" / name).write_text(text)
    (t / "ct2" / "sub" / "keep.txt").write_text("mine")


def flip_exponent_bit(path: Path) -> None:
    """One bit flipped in the last weight of a safetensors file (a huge, finite value)."""
    raw = bytearray(path.read_bytes())
    raw[-1] ^= 0x40
    path.write_bytes(bytes(raw))


def nan_weights(w: Path, t: Path) -> None:
    """A model directory saved (with its checksums) after one weight became NaN."""
    from aiayn.store import load_model, save_model
    from aiayn.train.checkpoint import model_assets

    model, cfg = load_model(w / "run/best")
    with torch.no_grad():
        next(model.parameters()).view(-1)[3] = float("nan")
    save_model(model, cfg, t / "nan", assets=model_assets(w / "run/best"))


def damaged_checkpoint_without_checksums(w: Path, t: Path) -> None:
    run = _copy(w, t, "run")
    step = list_checkpoints(run)[-1]
    flip_exponent_bit(step / "model.safetensors")
    (step / "checksums.json").unlink()


NONE = None
SERVE = ["serve", "--model", "{w}/run/best"]
TRANSLATE = ["translate", "--model", "{w}/run/best", "-i", "{w}/in.txt"]
PREPARE = ["prepare", "--src-lang", "src", "--tgt-lang", "tgt", "--valid", "{w}/bad/valid"]
GENERATE = ["generate", "--model", "{w}/lmrun/best", "--max-new-tokens", "3"]
PLOT_ATT = ["plot", "attention", "--model", "{w}/run/best", "--src", "the dog"]
CALIBRATE = ["calibrate", "{w}/run/best", "--src", "{w}/in.txt", "--ref", "{w}/in.txt"]
DISTILL = ["distill", "{w}/run/best", "{w}/in.txt", "--out", "{t}/d"]
TRAIN = ["train", "{t}/train.toml"]
VOCAB_FROM = ["prepare", "--src-lang", "src", "--tgt-lang", "tgt", "--train", "{w}/corpus/train"]
VOCAB_FROM += ["--valid", "{w}/corpus/valid", "--out", "{t}/d", "--vocab-from"]
VOCAB_FR_DE = ["prepare", "--src-lang", "fr", "--tgt-lang", "de", "--train", "{t}/c/train"]
VOCAB_FR_DE += ["--valid", "{t}/c/valid", "--out", "{t}/d"]
T = "{t}/train.toml"

CASES: list[tuple[str, Callable | None, list[str], str]] = [
    # -- numbers out of range: each names its option and the allowed range -------------
    ("average --last 0", NONE, ["average", "{w}/run", "--last", "0", "--out", "{t}/m"], "--last"),
    ("average --last -2", NONE, ["average", "{w}/run", "--last", "-2", "--out", "{t}/m"], "--last"),
    ("translate --max-src-len 0", NONE, [*TRANSLATE, "--max-src-len", "0"], "--max-src-len"),
    ("translate --max-src-len 1", NONE, [*TRANSLATE, "--max-src-len", "1"], "at least 2"),
    ("translate --beam 0", NONE, [*TRANSLATE, "--beam", "0"], "--beam"),
    ("translate --beam -3", NONE, [*TRANSLATE, "--beam", "-3"], "from 1 to 1024"),
    ("translate --beam x", NONE, [*TRANSLATE, "--beam", "x"], "whole number"),
    ("translate --beam > vocab/2", NONE, [*TRANSLATE, "--beam", "40"], "too large"),
    ("translate --alpha -1", NONE, [*TRANSLATE, "--alpha", "-1"], "--alpha"),
    ("translate --alpha nan", NONE, [*TRANSLATE, "--alpha", "nan"], "--alpha"),
    ("translate --max-len-b -100", NONE, [*TRANSLATE, "--max-len-b", "-100"], "--max-len-b"),
    ("translate --nbest 0", NONE, [*TRANSLATE, "--nbest", "0"], "--nbest"),
    ("translate --nbest > beam", NONE, [*TRANSLATE, "--nbest", "6", "--beam", "2"], "larger than"),
    ("translate --batch-tokens 0", NONE, [*TRANSLATE, "--batch-tokens", "0"], "--batch-tokens"),
    ("translate --threads -1", NONE, [*TRANSLATE, "--threads", "-1"], "--threads"),
    ("translate --precision fp8", NONE, [*TRANSLATE, "--precision", "fp8"], "--precision"),
    ("translate --profile turbo", NONE, [*TRANSLATE, "--profile", "turbo"], "--profile"),
    ("translate --stopping soon", NONE, [*TRANSLATE, "--stopping", "soon"], "--stopping"),
    ("translate --text cooked", NONE, [*TRANSLATE, "--text", "cooked"], "--text"),
    ("translate --format pdf", NONE, [*TRANSLATE, "--format", "pdf"], "--format"),
    ("translate --retranslate=yes", NONE, [*TRANSLATE, "--retranslate=yes"], "--retranslate"),
    ("generate --top-p 0", NONE, [*GENERATE, "--top-p", "0"], "--top-p"),
    ("generate --top-p 1.5", NONE, [*GENERATE, "--top-p", "1.5"], "--top-p"),
    ("generate --temperature -1", NONE, [*GENERATE, "--temperature", "-1"], "--temperature"),
    ("generate --top-k -1", NONE, [*GENERATE, "--top-k", "-1"], "--top-k"),
    ("generate --max-new-tokens -1", NONE, [*GENERATE, "--max-new-tokens", "-1"], "at least 0"),
    ("generate --seed -5", NONE, [*GENERATE, "--seed", "-5"], "--seed"),
    (
        "prepare --vocab-size 3",
        NONE,
        [*PREPARE, "--train", "{w}/bad/counts", "--out", "{t}/d", "--vocab-size", "3"],
        "--vocab-size",
    ),
    (
        "prepare --max-len 0",
        NONE,
        [*PREPARE, "--train", "{w}/bad/counts", "--out", "{t}/d", "--max-len", "0"],
        "--max-len",
    ),
    (
        "prepare --max-len-ratio 0.5",
        NONE,
        [*PREPARE, "--train", "{w}/bad/counts", "--out", "{t}/d", "--max-len-ratio", "0.5"],
        "at least 1",
    ),
    (
        "prepare --character-coverage 1.5",
        NONE,
        [*PREPARE, "--train", "{w}/bad/counts", "--out", "{t}/d", "--character-coverage", "1.5"],
        "--character-coverage",
    ),
    (
        "prepare --character-coverage 0",
        NONE,
        [*PREPARE, "--train", "{w}/bad/counts", "--out", "{t}/d", "--character-coverage", "0"],
        "character_coverage must be in (0, 1]",
    ),
    (
        "prepare --valid-fraction 1.5",
        NONE,
        ["prepare", "--text", "{w}/text.txt", "--out", "{t}/d", "--valid-fraction", "1.5"],
        "--valid-fraction",
    ),
    (
        "prepare --valid-fraction 0",
        NONE,
        ["prepare", "--text", "{w}/text.txt", "--out", "{t}/d", "--valid-fraction", "0"],
        "--valid-fraction",
    ),
    (
        "prepare --max-tokens 0",
        NONE,
        [*PREPARE, "--train", "{w}/bad/counts", "--out", "{t}/d", "--max-tokens", "0"],
        "--max-tokens",
    ),
    ("info --vocab-size 0", NONE, ["info", "--vocab-size", "0"], "--vocab-size"),
    (
        "plot positional --d-model 7",
        NONE,
        ["plot", "positional", "--d-model", "7", "-o", "{t}/p.png"],
        "even",
    ),
    (
        "plot positional --d-model 0",
        NONE,
        ["plot", "positional", "--d-model", "0", "-o", "{t}/p.png"],
        "--d-model",
    ),
    (
        "plot positional --length 1",
        NONE,
        ["plot", "positional", "--length", "1", "-o", "{t}/p.png"],
        "--length",
    ),
    (
        "plot attention --layers 0",
        NONE,
        [*PLOT_ATT, "--layers", "0", "-o", "{t}/a.png"],
        "numbered from 1",
    ),
    (
        "plot attention --layers 9",
        NONE,
        [*PLOT_ATT, "--layers", "9", "-o", "{t}/a.png"],
        "out of range",
    ),
    (
        "plot attention --heads 9",
        NONE,
        [*PLOT_ATT, "--heads", "9", "-o", "{t}/a.png"],
        "out of range",
    ),
    (
        "plot attention --layers a,b",
        NONE,
        [*PLOT_ATT, "--layers", "a,b", "-o", "{t}/a.png"],
        "comma-separated",
    ),
    ("plot attention --beam 0", NONE, [*PLOT_ATT, "--beam", "0", "-o", "{t}/a.png"], "--beam"),
    (
        "evaluate --block-size 0",
        NONE,
        ["evaluate", "--model", "{w}/lmrun/best", "--text", "{w}/text.txt", "--block-size", "0"],
        "--block-size",
    ),
    # -- training configs: every field range-checked, naming the field --------------------
    ("run.max_updates=-5", train_config(run={"max_updates": -5}), [*TRAIN], "max_updates"),
    ("run.max_updates=0", train_config(run={"max_updates": 0}), [*TRAIN], "max_updates"),
    ("run.save_every=0", train_config(run={"save_every": 0}), [*TRAIN], "save_every"),
    ("run.log_every=0", train_config(run={"log_every": 0}), [*TRAIN], "log_every"),
    ("run.valid_every=0", train_config(run={"valid_every": 0}), [*TRAIN], "valid_every"),
    ("run.keep_last=-1", train_config(run={"keep_last": -1}), [*TRAIN], "keep_last"),
    ("run.max_minutes=-1", train_config(run={"max_minutes": -1}), [*TRAIN], "max_minutes"),
    ("run.valid_beam=0", train_config(run={"valid_beam": 0}), [*TRAIN], "valid_beam"),
    ("run.precision=fp8", train_config(run={"precision": "fp8"}), [*TRAIN], "precision"),
    ("run.profile=turbo", train_config(run={"profile": "turbo"}), [*TRAIN], "profile"),
    ("run.device=tpu9", train_config(run={"device": "tpu9"}), [*TRAIN], "unknown device"),
    ("run.device=cuda:7", train_config(run={"device": "cuda:7"}), [*TRAIN], "cuda"),
    ("run.max_updates=ten", train_config(run={"max_updates": "ten"}), [*TRAIN], "expected int"),
    (
        "run.fp16 on CPU",
        train_config(run={"precision": "fp16", "device": "cpu"}),
        [*TRAIN],
        "fp16 needs a GPU",
    ),
    ("data.max_tokens=0", train_config(data={"max_tokens": 0}), [*TRAIN], "max_tokens"),
    ("data.batch_size=0", train_config(data={"batch_size": 0}), [*TRAIN], "batch_size"),
    (
        "data.pad_to_multiple=0",
        train_config(data={"pad_to_multiple": 0}),
        [*TRAIN],
        "pad_to_multiple must be a whole number at least 1",
    ),
    (
        "data.dir missing",
        train_config(data={"dir": "/nonexistent/data"}),
        [*TRAIN],
        "not a prepared",
    ),
    ("data.dir not a dataset", train_config(data={"dir": "/"}), [*TRAIN], "not a prepared"),
    ("data.valid_split unknown", train_config(data={"valid_split": "dev"}), [*TRAIN], "no split"),
    ("model.d_model=0", train_config(model={"d_model": 0}), [*TRAIN], "d_model"),
    ("model.n_heads=0", train_config(model={"n_heads": 0}), [*TRAIN], "n_heads"),
    ("model.d_model=30 n_heads=4", train_config(model={"d_model": 30}), [*TRAIN], "divisible"),
    (
        "model.d_model odd sinusoidal",
        train_config(model={"d_model": 33, "n_heads": 3}),
        [*TRAIN],
        "even d_model",
    ),
    ("model.dropout=1.5", train_config(model={"dropout": 1.5}), [*TRAIN], "dropout"),
    ("model.d_ff=-1", train_config(model={"d_ff": -1}), [*TRAIN], "d_ff"),
    ("model.activation=tanh", train_config(model={"activation": "tanh"}), [*TRAIN], "activation"),
    ("model.layer_norm_eps=0", train_config(model={"layer_norm_eps": 0.0}), [*TRAIN], "eps"),
    (
        "model.n_encoder_layers=0 for translation",
        train_config(model={"n_encoder_layers": 0}),
        [*TRAIN],
        "lm",
    ),
    ("optim.lr=-1", train_config(optim={"lr": -1.0}), [*TRAIN], "lr must be a number above 0"),
    (
        "optim.label_smoothing=1",
        train_config(optim={"label_smoothing": 1.0}),
        [*TRAIN],
        "label_smoothing",
    ),
    ("optim.betas=[0.9]", train_config(optim={"betas": [0.9]}), [*TRAIN], "betas"),
    (
        "optim.schedule=linear",
        train_config(optim={"schedule": "linear"}),
        [*TRAIN],
        "schedule",
    ),
    (
        "optim.budget_decay=step",
        train_config(optim={"schedule": "budget", "budget_decay": "step"}),
        [*TRAIN],
        "budget_decay",
    ),
    ("optim.betas=[0.9, 1.5]", train_config(optim={"betas": [0.9, 1.5]}), [*TRAIN], "betas"),
    ("optim.update_freq=0", train_config(optim={"update_freq": 0}), [*TRAIN], "update_freq"),
    ("optim.warmup_steps=0", train_config(optim={"warmup_steps": 0}), [*TRAIN], "warmup_steps"),
    ("optim.eps=0", train_config(optim={"eps": 0.0}), [*TRAIN], "eps"),
    ("optim.clip_norm=-1", train_config(optim={"clip_norm": -1.0}), [*TRAIN], "clip_norm"),
    ("optim.schedule=linear", train_config(optim={"schedule": "linear"}), [*TRAIN], "schedule"),
    ("unknown key", train_config(run={"max_update": 5}), [*TRAIN], "unknown key"),
    ("unknown table", toml_text('[runs]\ndir = "x"\n'), [*TRAIN], "unknown key"),
    ("TOML syntax", toml_text("[run\nmax_updates = 3\n"), [*TRAIN], "train.toml"),
    ("config missing", NONE, ["train", "{t}/nope.toml"], "no such config"),
    ("extends missing", toml_text('extends = "nope.toml"\n'), [*TRAIN], "nope.toml"),
    ("extends itself", toml_text('extends = "train.toml"\n'), [*TRAIN], "cycle"),
    ("--set without =", NONE, ["train", "{w}/train.toml", "--set", "run.max_updates"], "KEY=VALUE"),
    (
        "--set list whose quotes the shell took",
        NONE,
        ["train", "{w}/train.toml", "--set", "data.dir=[{w}/data, x]"],
        "strings inside need double quotes, and the shell keeps them only inside single quotes",
    ),
    (
        "--set into a value",
        NONE,
        ["train", "{w}/train.toml", "--set", "run.dir.x=1"],
        "not a table",
    ),
    (
        "lm config on translation data",
        NONE,
        ["train", "{w}/lm.toml", "--set", 'data.dir="{w}/data"'],
        "LM dataset",
    ),
    # -- runs, resume, checkpoints ------------------------------------------------------------
    ("run.dir has checkpoints", NONE, ["train", "{w}/train.toml"], "--resume"),
    ("run.dir is foreign", foreign_directory("mine"), [*TRAIN], "did not write"),
    (
        "run.dir is a file",
        file_at("runfile"),
        ["train", "{w}/train.toml", "--set", 'run.dir="{t}/runfile"'],
        "not a directory",
    ),
    ("resume, d_model changed", resume_with(d_model=64), [*TRAIN, "--resume"], "model.d_model"),
    ("init_from missing", init_from("{t}/nothing"), [*TRAIN], "no such model directory"),
    ("init_from a dataset", init_from("{w}/data"), [*TRAIN], "not a model directory"),
    ("init_from a run dir", init_from("{w}/run"), [*TRAIN], "not an aiayn model directory"),
    ("init_from, d_model differs", init_from("{w}/run/best", d_model=64), [*TRAIN], "d_model"),
    (
        "init_from, activation differs",
        init_from("{w}/run/best", activation="gelu"),
        [*TRAIN],
        "model.activation is 'relu'",
    ),
    ("init_from, another vocabulary", other_vocabulary_data, [*TRAIN], "--vocab-from"),
    (
        "prepare --vocab-from a dataset",
        NONE,
        [*PREPARE, "--train", "{w}/bad/counts", "--out", "{t}/d", "--vocab-from", "{w}/data"],
        "--vocab-from",
    ),
    (
        "translate --format html: 1,600 nested <b>",
        file_at("deep.txt", "<b>" * 1600 + "the dog\n"),
        ["translate", "--model", "{w}/run/best", "-i", "{t}/deep.txt", "--format", "html"],
        "HTML nested deeper than",
    ),
    (
        "prepare --vocab-from a language model",
        NONE,
        [*VOCAB_FROM, "{w}/lmrun/best"],
        "a language model",
    ),
    (
        "prepare --vocab-from a model of another language pair",
        corpus_as("fr", "de"),
        [*VOCAB_FR_DE, "--vocab-from", "{w}/run/best"],
        "a src-tgt model, and this corpus is fr-de",
    ),
    (
        "prepare --vocab-from with --text",
        NONE,
        ["prepare", "--text", "{w}/text.txt", "--out", "{t}/d", "--vocab-from", "{w}/run/best"],
        "--vocab-from",
    ),
    (
        "resume, activation changed",
        resume_with(activation="gelu"),
        [*TRAIN, "--resume"],
        "model.activation",
    ),
    (
        "resume, positions changed",
        resume_with(positional="sinusoidal_concat"),
        [*TRAIN, "--resume"],
        "model.positional",
    ),
    (
        "average of a missing dir",
        NONE,
        ["average", "{t}/nothing", "--out", "{t}/m"],
        "not a checkpoint",
    ),
    (
        "average --out a checkpoint",
        NONE,
        ["average", "{w}/run", "--last", "2", "--out", "{w}/run/checkpoints/step_00000006"],
        "checkpoints",
    ),
    (
        "average --out a foreign dir",
        foreign_directory("mine"),
        ["average", "{w}/run", "--out", "{t}/mine"],
        "aiayn wrote",
    ),
    (
        "average --out a file",
        file_at("file.txt"),
        ["average", "{w}/run", "--out", "{t}/file.txt"],
        "not a model directory",
    ),
    (
        "average of an LM and a translator",
        NONE,
        ["average", "{w}/run/best", "{w}/lmrun/best", "--out", "{t}/m"],
        "different model",
    ),
    # -- model directories, damaged or mismatched -----------------------------------------
    (
        "model dir missing",
        NONE,
        ["translate", "--model", "{t}/none", "-i", "{w}/in.txt"],
        "not found",
    ),
    (
        "config.json garbage",
        damaged_model("config.json", lambda p: p.write_text("{oops")),
        ["translate", "--model", "{t}/run/best", "-i", "{w}/in.txt"],
        "not valid JSON",
    ),
    (
        "config.json not aiayn",
        damaged_model("config.json", lambda p: p.write_text("{}")),
        ["translate", "--model", "{t}/run/best", "-i", "{w}/in.txt"],
        "not an aiayn model",
    ),
    (
        "weights missing",
        damaged_model("model.safetensors", lambda p: p.unlink()),
        ["translate", "--model", "{t}/run/best", "-i", "{w}/in.txt"],
        "not found",
    ),
    (
        "weights truncated",
        damaged_model("model.safetensors", truncate),
        ["translate", "--model", "{t}/run/best", "-i", "{w}/in.txt"],
        "corrupted",
    ),
    (
        "weights garbage",
        damaged_model("model.safetensors", lambda p: p.write_bytes(b"\0" * 64)),
        ["translate", "--model", "{t}/run/best", "-i", "{w}/in.txt"],
        "corrupted",
    ),
    (
        "config activation edited",
        model_with(model__activation="gelu"),
        ["translate", "--model", "{t}/run/best", "-i", "{w}/in.txt"],
        "saved with 'relu'",
    ),
    (
        "config positional edited",
        model_with(model__positional="sinusoidal_concat"),
        ["translate", "--model", "{t}/run/best", "-i", "{w}/in.txt"],
        "model.positional",
    ),
    (
        "config d_ff edited (shapes)",
        model_with(model__d_ff=128),
        ["translate", "--model", "{t}/run/best", "-i", "{w}/in.txt"],
        "d_ff",
    ),
    (
        "config unknown field",
        model_with(model__depth=3),
        ["translate", "--model", "{t}/run/best", "-i", "{w}/in.txt"],
        "unknown key",
    ),
    (
        "tokenizer.json missing",
        damaged_model("tokenizer.json", lambda p: p.unlink()),
        ["translate", "--model", "{t}/run/best", "-i", "{w}/in.txt"],
        "tokenizer.json",
    ),
    (
        "tokenizer.json garbage",
        damaged_model("tokenizer.json", lambda p: p.write_text("[1]")),
        ["translate", "--model", "{t}/run/best", "-i", "{w}/in.txt"],
        "tokenizer.json",
    ),
    (
        "tokenizer.json preprocessing not booleans",
        damaged_model("tokenizer.json", lambda p: p.write_text(_with_record(p, {"lowercase": 1}))),
        ["translate", "--model", "{t}/run/best", "-i", "{w}/in.txt"],
        "lowercase must be true or false",
    ),
    (
        "tokenizer.json preprocessing unknown step",
        damaged_model("tokenizer.json", lambda p: p.write_text(_with_record(p, {"stem": True}))),
        ["translate", "--model", "{t}/run/best", "-i", "{w}/in.txt"],
        "stem",
    ),
    (
        "tokenizer file missing",
        damaged_model("spm.model", lambda p: p.unlink()),
        ["translate", "--model", "{t}/run/best", "-i", "{w}/in.txt"],
        "spm.model",
    ),
    (
        "tokenizer swapped, same size",
        swapped_tokenizer,
        ["translate", "--model", "{t}/run/best", "-i", "{w}/in.txt"],
        "differs from the tokenizer",
    ),
    (
        "LM dir to translate",
        lm_as_translation_model,
        ["translate", "--model", "{t}/lmrun/best", "-i", "{w}/in.txt"],
        "language model",
    ),
    (
        "translator dir to generate",
        NONE,
        ["generate", "--model", "{w}/run/best"],
        "not a language model",
    ),
    (
        "translator dir to evaluate",
        NONE,
        ["evaluate", "--model", "{w}/run/best", "--text", "{w}/text.txt"],
        "not a language model",
    ),
    (
        "plot attention of an LM",
        NONE,
        ["plot", "attention", "--model", "{w}/lmrun/best", "--src", "x", "-o", "{t}/a.png"],
        "language model",
    ),
    # -- datasets, damaged --------------------------------------------------------------------
    (
        "dataset .bin bytes flipped",
        damaged_dataset("train.src.bin", flip_bytes),
        [*TRAIN],
        "checksum differs",
    ),
    ("dataset .bin truncated", damaged_dataset("train.tgt.bin", truncate), [*TRAIN], "bytes"),
    (
        "dataset .idx missing",
        damaged_dataset("valid.src.idx", lambda p: p.unlink()),
        [*TRAIN],
        "missing",
    ),
    ("dataset manifest garbage", dataset_manifest, [*TRAIN], "not valid JSON"),
    # -- corpora ------------------------------------------------------------------------------
    (
        "prepare: line counts differ",
        NONE,
        [*PREPARE, "--train", "{w}/bad/counts", "--out", "{t}/d"],
        "has 10 lines",
    ),
    (
        "prepare: bad UTF-8 line",
        NONE,
        [*PREPARE, "--train", "{w}/bad/utf8", "--out", "{t}/d"],
        "utf8.tgt: line 2: invalid UTF-8",
    ),
    (
        "prepare: truncated .gz",
        NONE,
        [*PREPARE, "--train", "{w}/bad/train", "--out", "{t}/d"],
        "train.src.gz: unreadable",
    ),
    (
        "prepare: empty corpus",
        NONE,
        [*PREPARE, "--train", "{w}/bad/empty", "--out", "{t}/d"],
        "empty",
    ),
    (
        "prepare: missing file",
        NONE,
        [*PREPARE, "--train", "{w}/bad/nothing", "--out", "{t}/d"],
        "no such file",
    ),
    (
        "prepare: same languages",
        NONE,
        [
            "prepare",
            "--src-lang",
            "en",
            "--tgt-lang",
            "en",
            "--train",
            "{w}/bad/counts",
            "--valid",
            "{w}/bad/valid",
            "--out",
            "{t}/d",
        ],
        "both 'en'",
    ),
    ("prepare: missing options", NONE, ["prepare", "--out", "{t}/d", "--train", "x"], "--src-lang"),
    (
        "prepare: vocabulary too large",
        NONE,
        [*PREPARE, "--train", "{w}/bad/valid", "--out", "{t}/d", "--vocab-size", "5000"],
        "larger than",
    ),
    (
        "prepare: --out a foreign dir",
        foreign_directory("mine"),
        [*PREPARE, "--train", "{w}/bad/counts", "--out", "{t}/mine", "--overwrite"],
        "aiayn wrote",
    ),
    (
        "prepare: --out exists",
        NONE,
        [*PREPARE, "--train", "{w}/corpus/train", "--out", "{w}/data"],
        "--overwrite",
    ),
    (
        "prepare: --out is a file",
        file_at("file.txt"),
        [*PREPARE, "--train", "{w}/bad/counts", "--out", "{t}/file.txt"],
        "not a dataset",
    ),
    (
        "prepare --text: bad UTF-8",
        NONE,
        ["prepare", "--text", "{w}/bad_utf8.txt", "--out", "{t}/d"],
        "invalid UTF-8",
    ),
    (
        "prepare --text: missing",
        NONE,
        ["prepare", "--text", "{t}/none.txt", "--out", "{t}/d"],
        "no such file",
    ),
    (
        "prepare --text: empty",
        file_at("empty.txt", ""),
        ["prepare", "--text", "{t}/empty.txt", "--out", "{t}/d"],
        "empty",
    ),
    (
        "data: no local copy",
        NONE,
        ["data", "multi30k", "--dest", "{t}/m", "--from", "{t}/none"],
        "not found",
    ),
    (
        "data: test set language unknown",
        NONE,
        ["data", "flores200", "--dest", "{t}/ts", "--langs", "ko,xx"],
        "unknown language 'xx'",
    ),
    ("data: --langs empty", NONE, ["data", "ntrex", "--dest", "{t}/ts", "--langs", ","], "--langs"),
    (
        "data: --from and --mirror",
        NONE,
        ["data", "tatoeba", "--dest", "{t}/ts", "--from", "{t}", "--mirror", "file:///x"],
        "not both",
    ),
    (
        "data: test set mirror missing",
        NONE,
        ["data", "ntrex", "--dest", "{t}/ts", "--mirror", "file:///no/such/mirror"],
        "cannot download",
    ),
    (
        "data: test set not in the local copy",
        NONE,
        ["data", "flores200", "--dest", "{t}/ts", "--from", "{t}/none"],
        "not found in the local copy",
    ),
    # -- translate and evaluate -----------------------------------------------------------
    (
        "translate: input missing",
        NONE,
        ["translate", "--model", "{w}/run/best", "-i", "{t}/none.txt"],
        "no such file",
    ),
    (
        "translate: input bad UTF-8",
        NONE,
        ["translate", "--model", "{w}/run/best", "-i", "{w}/bad_utf8.txt"],
        "line 2: invalid UTF-8",
    ),
    ("translate: --output is a dir", NONE, [*TRANSLATE, "-o", "{t}"], "is a directory"),
    (
        "translate: --output dir missing",
        NONE,
        [*TRANSLATE, "-o", "{t}/no/such/out.txt"],
        "does not exist",
    ),
    ("translate: --ref count differs", NONE, [*TRANSLATE, "--ref", "{w}/ref1.txt"], "has 1 lines"),
    ("translate: --ref missing", NONE, [*TRANSLATE, "--ref", "{t}/none.txt"], "no such file"),
    ("translate: --device tpu9", NONE, [*TRANSLATE, "--device", "tpu9"], "unknown device"),
    ("translate: --device cuda here", NONE, [*TRANSLATE, "--device", "cuda"], "CUDA"),
    ("translate: --device mps here", NONE, [*TRANSLATE, "--device", "mps"], "no Apple GPU"),
    (
        "translate: --on-long error",
        NONE,
        [*TRANSLATE, "--max-src-len", "2", "--on-long", "error"],
        "more than --max-src-len",
    ),
    ("evaluate: nothing given", NONE, ["evaluate"], "--hyp"),
    (
        "evaluate: counts differ",
        NONE,
        ["evaluate", "--hyp", "{w}/in.txt", "--ref", "{w}/ref1.txt"],
        "has 1 lines",
    ),
    (
        "evaluate: hyp bad UTF-8",
        NONE,
        ["evaluate", "--hyp", "{w}/bad_utf8.txt", "--ref", "{w}/in.txt"],
        "invalid UTF-8",
    ),
    (
        "evaluate: unknown --tokenize",
        NONE,
        ["evaluate", "--hyp", "{w}/in.txt", "--ref", "{w}/in.txt", "--tokenize", "mecab"],
        "invalid choice",
    ),
    (
        "evaluate: --tokenized with --tokenize 13a",
        NONE,
        [
            "evaluate",
            "--hyp",
            "{w}/in.txt",
            "--ref",
            "{w}/in.txt",
            "--tokenized",
            "--tokenize",
            "13a",
        ],
        "--tokenized means --tokenize none",
    ),
    ("evaluate: --model without --text", NONE, ["evaluate", "--model", "{w}/lmrun/best"], "--text"),
    (
        "evaluate: text too short",
        file_at("short.txt", "ab"),
        ["evaluate", "--model", "{w}/lmrun/best", "--text", "{t}/short.txt"],
        "shorter",
    ),
    ("generate: empty prompt", NONE, [*GENERATE, "--prompt", ""], "empty"),
    ("generate: --device tpu9", NONE, [*GENERATE, "--device", "tpu9"], "unknown device"),
    # -- plots ----------------------------------------------------------------------------
    ("plot: bad extension", NONE, ["plot", "positional", "-o", "{t}/p.jpg"], ".png or .svg"),
    ("plot: output is a dir", NONE, ["plot", "positional", "-o", "{t}"], ".png or .svg"),
    (
        "plot: parent is a file",
        file_at("file.txt"),
        ["plot", "positional", "-o", "{t}/file.txt/p.png"],
        "not a directory",
    ),
    ("plot curves: no run", NONE, ["plot", "curves", "{t}", "-o", "{t}/c.png"], "no metrics log"),
    (
        "plot curves: garbage line",
        metrics_with_garbage,
        ["plot", "curves", "{t}/run", "-o", "{t}/c.png"],
        "metrics.jsonl: line 2",
    ),
    (
        "plot attention: empty --src",
        NONE,
        ["plot", "attention", "--model", "{w}/run/best", "--src", " ", "-o", "{t}/a.png"],
        "empty",
    ),
    # -- serve --------------------------------------------------------------------------------
    ("serve: model missing", NONE, ["serve", "--model", "{t}/none"], "none"),
    ("serve: not a model", NONE, ["serve", "--model", "{w}/data"], "config.json"),
    ("serve: --port 70000", NONE, [*SERVE, "--port", "70000"], "--port"),
    ("serve: --host unknown", NONE, [*SERVE, "--host", "no.such.host.invalid"], "--host"),
    ("serve: --api-keys missing", NONE, [*SERVE, "--api-keys", "{t}/keys"], "keys"),
    ("serve: --api-keys empty", no_keys, [*SERVE, "--api-keys", "{t}/keys"], "no API key"),
    (
        "serve: --api-keys, an indented comment only",
        file_at("keys", "   # not a key\n"),
        [*SERVE, "--api-keys", "{t}/keys"],
        "no API key",
    ),
    ("serve: --max-wait-ms -1", NONE, [*SERVE, "--max-wait-ms", "-1"], "--max-wait-ms"),
    ("serve: --profile turbo", NONE, [*SERVE, "--profile", "turbo"], "--profile"),
    ("serve: --workers 0", NONE, [*SERVE, "--workers", "0"], "--workers"),
    ("serve: --max-file-mb 21", NONE, [*SERVE, "--max-file-mb", "21"], "--max-file-mb"),
    ("serve: --max-file-mb 0", NONE, [*SERVE, "--max-file-mb", "0"], "--max-file-mb"),
    ("serve: --file-expiry 0", NONE, [*SERVE, "--file-expiry", "0"], "--file-expiry"),
    (
        "serve: --max-alternatives -1",
        NONE,
        [*SERVE, "--max-alternatives", "-1"],
        "--max-alternatives",
    ),
    (
        "serve: --max-tokens-limit x",
        NONE,
        [*SERVE, "--max-tokens-limit", "x"],
        "--max-tokens-limit",
    ),
    ("calibrate --beam 0", NONE, [*CALIBRATE, "--beam", "0"], "--beam"),
    (
        "calibrate --min-confidence 2",
        NONE,
        [*CALIBRATE, "--min-confidence", "2"],
        "--min-confidence",
    ),
    ("calibrate: too few lines", NONE, CALIBRATE, "a calibration needs at least 50"),
    ("distill --alpha -1", NONE, [*DISTILL, "--alpha", "-1"], "--alpha"),
    ("distill --stopping soon", NONE, [*DISTILL, "--stopping", "soon"], "--stopping"),
    ("distill --out a file", file_at("taken"), [*DISTILL[:-1], "{t}/taken"], "is not a directory"),
    ("serve: --queue-size 0", NONE, [*SERVE, "--queue-size", "0"], "--queue-size"),
    ("serve: two models, one pair", NONE, [*SERVE, "--model", "{w}/run/best"], "a second model"),
    (
        "serve: --suggestions unwritable",
        NONE,
        [*SERVE, "--port", "0", "--suggestions", "{t}/no/such/dir/s.jsonl"],  # any free port
        "cannot write suggestions",
    ),
    (
        "serve: translation and language models",
        NONE,
        [*SERVE, "--model", "{w}/lmrun/best"],
        "or one language model, not both",
    ),
    # -- writes that must not destroy, weights that must be verified (issue #48) -------------
    (
        "export ct2 --overwrite over files aiayn did not write",
        foreign_ct2,
        ["export", "ct2", "{w}/run/best", "--out", "{t}/ct2", "--overwrite"],
        "notes.txt",
    ),
    (
        "export ct2 into an aiayn model directory",
        lambda w, t: _copy(w, t, "run/best"),
        ["export", "ct2", "{w}/run/best", "--out", "{t}/run/best", "--overwrite"],
        "an aiayn model directory",
    ),
    (
        "average --out the run's best model",
        NONE,
        ["average", "{w}/run", "--last", "2", "--out", "{w}/run/best"],
        "the run's own 'best'",
    ),
    (
        "weights: one exponent bit flipped",
        damaged_model("model.safetensors", flip_exponent_bit),
        ["translate", "--model", "{t}/run/best", "-i", "{w}/in.txt"],
        "checksum differs",
    ),
    (
        "weights: a NaN",
        nan_weights,
        ["translate", "--model", "{t}/nan", "-i", "{w}/in.txt"],
        "non-finite",
    ),
    (
        "average: a flipped checkpoint without checksums.json",
        damaged_checkpoint_without_checksums,
        ["average", "{t}/run", "--last", "2", "--out", "{t}/avg"],
        "checksum differs",
    ),
    # -- options that crashed instead of being refused (issue #48) ---------------------------
    ("translate --threads 100000", NONE, [*TRANSLATE, "--threads", "100000"], "--threads"),
    ("generate --seed 2**70", NONE, [*GENERATE, "--seed", str(2**70)], "--seed"),
    ("train: a directory as config", NONE, ["train", "{t}"], "a directory"),
    (
        "dataset .idx bytes flipped",
        damaged_dataset("train.src.idx", flip_bytes),
        [*TRAIN],
        "train.src.idx",
    ),
    (
        "evaluate: two empty files",
        file_at("empty.txt", ""),
        ["evaluate", "--hyp", "{t}/empty.txt", "--ref", "{t}/empty.txt"],
        "nothing to score",
    ),
    (
        "plot positional --d-model 100000",
        NONE,
        ["plot", "positional", "--d-model", "100000", "-o", "{t}/p.png"],
        "--d-model",
    ),
    # -- pipeline -----------------------------------------------------------------------------
    ("pipeline: recipe missing", NONE, ["pipeline", "{t}/none.toml"], "no such config"),
    (
        "pipeline: unknown table key",
        recipe_text("[pipeline]\nbeams = 4\n"),
        ["pipeline", "{t}/recipe.toml", "--work", "{t}/work"],
        "unknown key",
    ),
    (
        "pipeline: beam 0",
        recipe_text("[pipeline]\nbeam = 0\n"),
        ["pipeline", "{t}/recipe.toml", "--work", "{t}/work"],
        "beam",
    ),
    (
        "pipeline: decoding batch of 0 tokens",
        recipe_text("[pipeline]\nbatch_tokens = 0\n"),
        ["pipeline", "{t}/recipe.toml", "--work", "{t}/work"],
        "batch_tokens",
    ),
    (
        "pipeline: prepare key clash",
        recipe_text('[prepare]\nsrc_lang = "xx"\n'),
        ["pipeline", "{t}/recipe.toml", "--work", "{t}/work"],
        "set by the pipeline",
    ),
    (
        "pipeline: negative alpha",
        recipe_text("[pipeline]\nalpha = -1.0\n"),
        ["pipeline", "{t}/recipe.toml", "--work", "{t}/work"],
        "alpha",
    ),
    (
        "pipeline: average_share 1",
        recipe_text("[pipeline]\naverage_share = 1.0\n"),
        ["pipeline", "{t}/recipe.toml", "--work", "{t}/work"],
        "average_share",
    ),
    (
        "pipeline: negative reserve_minutes",
        recipe_text("[pipeline]\nreserve_minutes = -2\n"),
        ["pipeline", "{t}/recipe.toml", "--work", "{t}/work"],
        "reserve_minutes",
    ),
    (
        "pipeline: reserve_minutes the whole budget",
        recipe_text("[pipeline]\nreserve_minutes = 10\n[run]\nmax_minutes = 10\n"),
        ["pipeline", "{t}/recipe.toml", "--work", "{t}/work"],
        "leaves no time to train",
    ),
    (
        "pipeline: unknown dataset",
        recipe_text('[pipeline]\ndataset = "wmt99"\n'),
        ["pipeline", "{t}/recipe.toml", "--work", "{t}/work"],
        "dataset",
    ),
    (
        "pipeline: unknown BLEU tokenizer",
        recipe_text('[pipeline]\ntokenize = "mecab"\n'),
        ["pipeline", "{t}/recipe.toml", "--work", "{t}/work"],
        "tokenize",
    ),
    (
        "train: unknown validation BLEU tokenizer",
        NONE,
        ["train", "{w}/train.toml", "--set", "run.valid_tokenize=mecab"],
        "valid_tokenize",
    ),
]


def _run(argv: list[str], stdin: bytes | None = None) -> tuple[int, str]:
    old = sys.stdin
    if stdin is not None:
        sys.stdin = io.TextIOWrapper(io.BytesIO(stdin))
    try:
        return main(argv), ""
    except SystemExit as e:  # argparse's own errors
        return int(e.code or 0), ""
    finally:
        sys.stdin = old


@pytest.mark.parametrize(
    ("setup", "argv", "words"), [c[1:] for c in CASES], ids=[c[0] for c in CASES]
)
def test_bad_input_gets_one_clear_line(world, tmp_path, capsys, setup, argv, words):
    if argv[0] == "serve" and importlib.util.find_spec("fastapi") is None:
        pytest.skip("the serve extra is a dev dependency")
    if argv[0] == "export" and importlib.util.find_spec("ctranslate2") is None:
        pytest.skip("ctranslate2 is a dev dependency")
    if "cuda" in argv and torch.cuda.is_available():
        pytest.skip("CUDA is available on this machine")
    if setup is not None:
        setup(world, tmp_path)
    argv = [a.replace("{w}", str(world)).replace("{t}", str(tmp_path)) for a in argv]
    if argv[0] == "serve" and "--port" not in argv:  # a free port: cases run side by side
        argv = [*argv, "--port", "0"]
    status, _ = _run(argv)
    err = capsys.readouterr().err.strip().splitlines()
    assert status == 2, err
    assert len(err) >= 1 and "Traceback" not in "\n".join(err)
    last = err[-1]  # progress lines may come first; the error is the last line
    assert "error:" in last and words in last, last


def test_bad_utf8_on_stdin_names_the_line(world, capsys):
    status, _ = _run(["translate", "--model", str(world / "run/best")], b"ok\n\xff\xfe\n")
    assert status == 2
    assert "<stdin>: line 2: invalid UTF-8" in capsys.readouterr().err


def test_serve_on_a_port_in_use(world, capsys):
    pytest.importorskip("uvicorn", reason="the serve extra is a dev dependency")
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = str(taken.getsockname()[1])
        assert _run(["serve", "--model", str(world / "run/best"), "--port", port])[0] == 2
    assert f"cannot listen on 127.0.0.1:{port}" in capsys.readouterr().err


def test_nothing_is_lost(world, tmp_path):
    """After every refused write, what was there is still there."""
    (tmp_path / "mine").mkdir()
    (tmp_path / "mine" / "keep.txt").write_text("precious")
    checkpoint = world / "run" / "checkpoints" / "step_00000006"
    before = {p.name: p.read_bytes() for p in checkpoint.iterdir()}
    best = {p.name: p.read_bytes() for p in (world / "run" / "best").iterdir()}
    for argv in (
        [
            "prepare",
            "--text",
            str(world / "text.txt"),
            "--out",
            str(tmp_path / "mine"),
            "--overwrite",
        ],
        ["average", str(world / "run"), "--out", str(tmp_path / "mine")],
        ["average", str(world / "run"), "--last", "2", "--out", str(checkpoint)],
        ["average", str(world / "run"), "--last", "2", "--out", str(world / "run" / "best")],
        ["train", str(world / "train.toml"), "--set", f'run.dir="{tmp_path / "mine"}"'],
    ):
        assert _run(argv)[0] == 2
        assert (tmp_path / "mine" / "keep.txt").read_text() == "precious"
        assert {p.name: p.read_bytes() for p in checkpoint.iterdir()} == before
        assert {p.name: p.read_bytes() for p in (world / "run" / "best").iterdir()} == best


def test_case_count_and_categories_stay_broad():
    assert len(CASES) >= 100
