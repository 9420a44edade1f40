"""The paper's base run projected from a measurement: the WMT14 base recipe
(``configs/wmt14_en_de_base.toml``) for a few hundred updates on WMT-shaped data.

    python bench/wmt_projection.py --data DIR [--updates 300] [--set KEY=VALUE ...]

``DIR`` is a dataset ``aiayn prepare`` wrote with the recipe's vocabulary (37,000 joint BPE
pieces), e.g. from the synthetic WMT-shaped corpus of ``bench/scale.py`` (``write_corpus``;
its sentences average ~33 pieces). The recipe trains as written (``data.max_tokens`` 3,125 ×
``optim.update_freq`` 8 = ~25,000 target tokens an update on one GPU, bf16 where the
hardware has it), then, unless ``--as-written-only``, once more with the same ~25,000 tokens
in one batch (``data.max_tokens=25000``, ``optim.update_freq=1``; the same update, fewer
and larger products). For each: seconds an update (the median of the logged windows after
the first, which holds the start), target tokens a second, the GPU's peak memory, and the
wall time 100,000 updates (§5.2) would take at that pace, beside the paper's 12 hours on
8 P100 GPUs.
"""

from __future__ import annotations

import argparse
import itertools
import json
import statistics
import tempfile
import time
from pathlib import Path

RECIPE = Path(__file__).resolve().parents[1] / "configs" / "wmt14_en_de_base.toml"
PAPER_UPDATES, PAPER_HOURS = 100_000, 12.0  # §5.2: base, 8 P100 GPUs
ONE_BATCH = ["data.max_tokens=25000", "optim.update_freq=1"]


def train(data: str, updates: int, overrides: list[str], run_dir: Path) -> dict:
    """Train the recipe for ``updates`` updates; its pace and memory."""
    import torch

    from aiayn.config_io import apply_overrides, load_toml, recipe_from_dict
    from aiayn.train import Trainer

    log_every = max(10, updates // 10)
    settings = [
        f"data.dir={json.dumps(data)}",
        f"run.dir={json.dumps(str(run_dir))}",
        f"run.max_updates={updates}",
        f"run.log_every={log_every}",
        f"run.valid_every={updates * 10}",
        f"run.save_every={updates * 10}",
        *overrides,
    ]
    cfg = recipe_from_dict(apply_overrides(load_toml(str(RECIPE)), settings)).train
    start = time.perf_counter()
    trainer = Trainer(cfg)
    trainer.train()
    wall = time.perf_counter() - start
    rows = [json.loads(line) for line in (run_dir / "metrics.jsonl").open()]
    logged = [r for r in rows if r["kind"] == "train"]
    windows = [
        (b["time"] - a["time"]) / (b["update"] - a["update"]) for a, b in itertools.pairwise(logged)
    ]
    cuda = trainer.device.type == "cuda"
    return {
        "device": torch.cuda.get_device_name(trainer.device) if cuda else "cpu",
        "precision": trainer.precision,
        "seconds_per_update": statistics.median(windows),
        "tokens_per_s": statistics.median(r["tokens_per_s"] for r in logged[1:]),
        "peak_gpu_memory_gib": torch.cuda.max_memory_allocated(trainer.device) / 2**30
        if cuda
        else None,
        "wall_s": wall,
        "updates": updates,
    }


def report(name: str, result: dict) -> None:
    hours = result["seconds_per_update"] * PAPER_UPDATES / 3600
    memory = result["peak_gpu_memory_gib"]
    print(
        f"  {name:34} {result['seconds_per_update']:8.3f} s/update "
        f"{result['tokens_per_s']:>10,.0f} tok/s "
        f"{'' if memory is None else f'{memory:6.1f} GiB'}  100k updates: {hours:5.1f} h"
    )


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--data", required=True, help="a prepared dataset (37k joint BPE)")
    parser.add_argument("--updates", type=int, default=300)
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE")
    parser.add_argument("--as-written-only", action="store_true")
    args = parser.parse_args()
    variants = {"as written (3,125 tokens x 8)": []}
    if not args.as_written_only:
        variants["one batch of 25,000 tokens"] = ONE_BATCH
    results = {}
    for name, overrides in variants.items():
        with tempfile.TemporaryDirectory() as run_dir:
            results[name] = train(args.data, args.updates, overrides + args.set, Path(run_dir))
    first = next(iter(results.values()))
    print(
        f"\nWMT14 base recipe, {args.updates} updates on {args.data}, "
        f"{first['device']}, {first['precision']}"
    )
    for name, result in results.items():
        report(name, result)
    print(f"  the paper (§5.2): {PAPER_UPDATES:,} updates in {PAPER_HOURS:.0f} h on 8 P100 GPUs")
    print(json.dumps(results))


if __name__ == "__main__":
    main()
