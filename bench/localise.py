"""Localisation files: how fast a catalogue is translated, and whether every placeholder
comes back, against the same texts translated as plain lines.

    python bench/localise.py --model DIR [--units 3000] [--format po] [--beam 1]
        [--runs 3] [--isa native|avx2] [--seed 0]

A catalogue of ``--units`` units is made from Multi30k's English validation and test sets
(raw text under ``AIAYN_DATA_DIR``, default ``../shared/data``): each unit one sentence,
1-3 placeholders of a seeded choice of every common syntax put between its words (printf,
Python, .NET/ICU, i18next, Ruby, markup, entities), one in ten a plural. The same texts are
written one a line. Each is translated by ``aiayn translate`` in a process of its own, the
two alternately, ``--runs`` times: the median seconds of each, the catalogue's units per
second and its time against the lines'. Then the catalogue's output is read back: units
translated, units left untranslated (a placeholder would have been lost: the share must be
0), and placeholders kept in the translated units (must be 100%).
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import hold_to_isa, instruction_set

PLACEHOLDERS = (
    "%s",
    "%1$s",
    "%(count)d",
    "%d",
    "{name}",
    "{0}",
    "{{count}}",
    "%{user}",
    "$t(app.name)",
    "%@",
    "&amp;",
)
SETS = ("val", "test_2016_flickr", "test_2017_flickr")


def sentences(limit: int) -> list[str]:
    """Up to ``limit`` English sentences of Multi30k's validation and test sets."""
    root = Path(os.environ.get("AIAYN_DATA_DIR", "../shared/data")) / "multi30k"
    found: list[str] = []
    for name in SETS:
        with gzip.open(root / f"{name}.en.gz", "rt", encoding="utf-8") as f:
            found += [line.strip() for line in f if line.strip()]
    return found[:limit]


def with_placeholders(sentence: str, rng: random.Random) -> str:
    """``sentence`` with 1-3 placeholders between its words, or a word wrapped in <b>."""
    words = sentence.split()
    for _ in range(rng.randint(1, 3)):
        at = rng.randint(1, len(words) - 1) if len(words) > 1 else 1
        if rng.random() < 0.15:
            words[at - 1] = f"<b>{words[at - 1]}</b>"
        else:
            words.insert(at, rng.choice(PLACEHOLDERS))
    return " ".join(words)


def quoted(text: str) -> str:
    return json.dumps(text, ensure_ascii=False)


def catalogue(texts: list[str], rng: random.Random) -> str:
    """A PO template of ``texts``: every tenth unit a plural of its text and the next."""
    units = ['msgid ""\nmsgstr ""\n"Content-Type: text/plain; charset=UTF-8\\n"\n']
    for i, text in enumerate(texts):
        if i % 10 == 9:
            plural = with_placeholders(texts[i - 1], rng)
            units.append(
                f"msgctxt {quoted(f'u{i}')}\nmsgid {quoted(text)}\nmsgid_plural "
                f'{quoted(plural)}\nmsgstr[0] ""\nmsgstr[1] ""\n'
            )
        else:
            units.append(f'msgctxt {quoted(f"u{i}")}\nmsgid {quoted(text)}\nmsgstr ""\n')
    return "\n".join(units)


def timed(argv: list[str]) -> float:
    start = time.perf_counter()
    subprocess.run(argv, check=True, capture_output=True)
    return time.perf_counter() - start


def placeholders_kept(out: Path) -> tuple[int, int, int, int]:
    """Units translated, left untranslated, and placeholders in the translated units'
    sources, and of those kept in their targets."""
    from translate.storage.po import pofile

    from aiayn.text.documents.messages import placeholders

    store = pofile()
    store.parse(out.read_bytes())
    translated = untranslated = total = kept = 0
    for unit in store.units:
        if unit.isheader():
            continue
        targets = [s for s in getattr(unit.target, "strings", [unit.target]) if s]
        if not targets:
            untranslated += 1
            continue
        translated += 1
        sources = [str(s) for s in getattr(unit.source, "strings", [unit.source])]
        for source, target in zip(sources, targets[: len(sources)], strict=False):
            want = placeholders(source)
            total += sum(want.values())
            kept += sum((want & placeholders(target)).values())
    return translated, untranslated, total, kept


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", required=True)
    parser.add_argument("--units", type=int, default=3000)
    parser.add_argument("--beam", type=int, default=1)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--isa", choices=("native", "avx2"), default="native")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    header = hold_to_isa(args.isa)
    print(instruction_set(), *header, sep="\n")
    rng = random.Random(args.seed)
    texts = [with_placeholders(s, rng) for s in sentences(args.units)]
    with tempfile.TemporaryDirectory() as work:
        po, lines, out = Path(work, "app.pot"), Path(work, "app.txt"), Path(work, "de.po")
        po.write_text(catalogue(texts, rng), encoding="utf-8")
        lines.write_text("\n".join(texts) + "\n", encoding="utf-8")
        base = [sys.executable, "-m", "aiayn", "translate", "--model", args.model]
        base += ["--beam", str(args.beam), "--precision", "fp32"]
        seconds: dict[str, list[float]] = {"catalogue": [], "lines": []}
        for _ in range(args.runs):
            seconds["catalogue"].append(timed([*base, "-i", str(po), "-o", str(out)]))
            seconds["lines"].append(timed([*base, "-i", str(lines), "-o", os.devnull]))
        translated, untranslated, total, kept = placeholders_kept(out)
    cat, plain = (statistics.median(seconds[k]) for k in ("catalogue", "lines"))
    print(f"{len(texts)} units ({total} placeholders), beam {args.beam}, {args.runs} runs each")
    print(f"catalogue: {cat:.1f}s ({len(texts) / cat:.0f} units/s); lines: {plain:.1f}s")
    print(f"catalogue / lines time: {cat / plain:.2f}x")
    print(f"units translated {translated}, left untranslated {untranslated}")
    print(f"placeholders kept in translated units: {kept}/{total} ({100 * kept / total:.1f}%)")


if __name__ == "__main__":
    main()
