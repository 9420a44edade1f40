"""Small synthetic parallel corpora written to temporary directories."""

from __future__ import annotations

import gzip
import random
from pathlib import Path

WORDS = [
    "the",
    "a",
    "dog",
    "cat",
    "runs",
    "sleeps",
    "on",
    "under",
    "big",
    "small",
    "red",
    "blue",
    "house",
    "tree",
    "man",
    "woman",
    "child",
    "ball",
    "plays",
    "with",
    "near",
    "street",
    "park",
    "water",
    "jumps",
    "sits",
    ".",
    ",",
    "!",
]


def sentences(
    n: int, seed: int = 0, *, min_len: int = 3, max_len: int = 12, words: list[str] = WORDS
) -> list[str]:
    rng = random.Random(seed)
    return [" ".join(rng.choices(words, k=rng.randint(min_len, max_len))) for _ in range(n)]


def invented_words(n: int, seed: int = 0) -> list[str]:
    """``n`` random lowercase words of 2-9 letters: text with enough different subwords for
    a tokenizer of a few hundred pieces (``WORDS`` supports about 200)."""
    rng = random.Random(seed)
    letters = "abcdefghijklmnopqrstuvwxyz"
    return ["".join(rng.choices(letters, k=rng.randint(2, 9))) for _ in range(n)]


def write_lines(path: Path, lines: list[str], *, gz: bool = False) -> Path:
    text = "".join(f"{line}\n" for line in lines).encode("utf-8")
    if gz:
        path = path.with_name(path.name + ".gz")
        path.write_bytes(gzip.compress(text))
    else:
        path.write_bytes(text)
    return path


def write_parallel(root: Path, split: str, n: int, seed: int = 0, *, gz: bool = False) -> str:
    """Write ``root/split.src`` and ``root/split.tgt`` (target: source reversed); return prefix."""
    src = sentences(n, seed)
    tgt = [" ".join(reversed(s.split())) for s in src]
    write_lines(root / f"{split}.src", src, gz=gz)
    write_lines(root / f"{split}.tgt", tgt, gz=gz)
    return str(root / split)


def make_corpus(root: Path, *, train: int = 400, gz: bool = False) -> dict[str, str]:
    root.mkdir(parents=True, exist_ok=True)
    return {
        "train": write_parallel(root, "train", train, seed=0, gz=gz),
        "valid": write_parallel(root, "valid", 30, seed=1, gz=gz),
        "test": write_parallel(root, "test", 30, seed=2, gz=gz),
    }
