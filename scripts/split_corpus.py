"""Split one parallel corpus into train / valid / test files with no sentence in two splits.

Pairs that share a source or a target sentence (Tatoeba holds many: one English sentence,
several translations) are kept together, so no test sentence is seen in training.

    python3 scripts/split_corpus.py PREFIX SRC TGT OUT_DIR --valid 1000 --test 1000

reads PREFIX.SRC and PREFIX.TGT (plain or .gz) and writes OUT_DIR/{train,valid,test}.{SRC,TGT}.
"""

from __future__ import annotations

import argparse
import gzip
import random
from pathlib import Path


def read(path: Path) -> list[str]:
    if not path.exists() and path.with_name(path.name + ".gz").exists():
        path = path.with_name(path.name + ".gz")
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rt", encoding="utf-8") as f:
        return [line.rstrip("\n") for line in f]


def groups(src: list[str], tgt: list[str]) -> list[list[int]]:
    """Indices of pairs, grouped so that pairs sharing a sentence on either side meet."""
    parent = list(range(len(src)))

    def root(i: int) -> int:
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    for side in (src, tgt):
        first: dict[str, int] = {}
        for i, text in enumerate(side):
            j = first.setdefault(text, i)
            parent[root(i)] = root(j)
    by_root: dict[int, list[int]] = {}
    for i in range(len(src)):
        by_root.setdefault(root(i), []).append(i)
    return list(by_root.values())


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("prefix")
    ap.add_argument("src")
    ap.add_argument("tgt")
    ap.add_argument("out")
    ap.add_argument("--valid", type=int, default=1000, help="pairs for validation (about)")
    ap.add_argument("--test", type=int, default=1000, help="pairs for testing (about)")
    ap.add_argument("--seed", type=int, default=1)
    args = ap.parse_args()
    src = read(Path(f"{args.prefix}.{args.src}"))
    tgt = read(Path(f"{args.prefix}.{args.tgt}"))
    if len(src) != len(tgt):
        raise SystemExit(f"{args.prefix}: {len(src)} {args.src} lines but {len(tgt)} {args.tgt}")
    pairs = sorted({(s, t) for s, t in zip(src, tgt, strict=True) if s.strip() and t.strip()})
    src, tgt = [p[0] for p in pairs], [p[1] for p in pairs]
    grouped = groups(src, tgt)
    random.Random(args.seed).shuffle(grouped)
    splits: dict[str, list[int]] = {"test": [], "valid": [], "train": []}
    for group in grouped:
        wanted = (("test", args.test), ("valid", args.valid))
        name = next((n for n, size in wanted if len(splits[n]) < size), "train")
        splits[name].extend(group)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    for name, index in splits.items():
        for lang, side in ((args.src, src), (args.tgt, tgt)):
            text = "".join(side[i] + "\n" for i in sorted(index))
            (out / f"{name}.{lang}").write_text(text, encoding="utf-8")
        print(f"{name}: {len(index)} pairs")


if __name__ == "__main__":
    main()
