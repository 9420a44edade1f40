"""A long training run as a user makes it: its whole time, its memory, and how steady its
training speed stays.

    python bench/long_run.py measure --out DIR -- aiayn pipeline configs/multi30k_en_de_tiny.toml
    python bench/long_run.py report RUN_DIR[:RSS_FILE] ... [--labels before after] [-o PNG]

    python bench/long_run.py steady --out DIR [--minutes 30] [--window 100]

``measure`` runs the command, samples the resident memory of its whole process tree every
second into ``DIR/rss.tsv`` (seconds since the epoch, MiB) and writes its wall time, exit
status and peak into ``DIR/command.json``. ``report`` reads a run directory's
``metrics.jsonl`` (training speed of each logging window) and the memory samples (given after
a colon, else the run's own ``rss_mb`` column), prints for each run the median speed, the
spread of its windows around the median, the last 10% of windows against the first 10%, and
the peak memory, and draws speed and memory against updates.

``steady`` trains the tiny model, as the recipe does (bfloat16 autocast where the CPU has it,
aiayn's allocator set-up, 2 threads), on one fixed batch of the recipe's size for
``--minutes``, and writes the same windows into ``DIR/metrics.jsonl``: identical work in
every window, so whatever spread ``report`` then shows is the machine's, not the trainer's
(no new shapes, no data, no validation, no checkpoints).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

from common import set_up_allocator, tree_rss


def measure(out: Path, command: list[str]) -> int:
    out.mkdir(parents=True, exist_ok=True)
    start = time.time()
    proc = subprocess.Popen(command)
    peak = 0.0
    with (out / "rss.tsv").open("w") as samples:
        while proc.poll() is None:
            rss = tree_rss(proc.pid) / (1 << 20)
            peak = max(peak, rss)
            samples.write(f"{time.time():.1f}\t{rss:.1f}\n")
            samples.flush()
            time.sleep(1.0)
    seconds = time.time() - start
    summary = {"command": command, "seconds": seconds, "status": proc.returncode, "peak_mb": peak}
    (out / "command.json").write_text(json.dumps(summary, indent=2) + "\n")
    print(
        f"{' '.join(command)}: exit {proc.returncode}, {seconds / 60:.1f} min, peak {peak:,.0f} MiB"
    )
    return proc.returncode


def steady(out: Path, minutes: float, window: int, pairs: int) -> None:
    import torch
    from train import training_step

    from aiayn.runtime import resolve_precision

    set_up_allocator("tuned")
    precision = resolve_precision("auto", torch.device("cpu"))
    step, (_, _, tgt_out) = training_step("aiayn", "tiny", precision, "cpu", pairs)
    tokens = int((tgt_out != 0).sum())
    out.mkdir(parents=True, exist_ok=True)
    for _ in range(3):  # warm-up: kernels compiled, memory allocated
        step()
    end, update = time.time() + 60 * minutes, 0
    with (out / "metrics.jsonl").open("w") as metrics:
        while time.time() < end:
            begin = time.perf_counter()
            for _ in range(window):
                step()
            update += window
            row = {
                "kind": "train",
                "update": update,
                "time": time.time(),
                "tokens_per_s": window * tokens / (time.perf_counter() - begin),
                "rss_mb": tree_rss(os.getpid()) / (1 << 20),
            }
            metrics.write(json.dumps(row) + "\n")
            metrics.flush()
    print(f"{update:,} updates of {tokens:,} target tokens ({precision}) in {out}")


def load_run(spec: str) -> dict:
    """Windows of a run: update, end time, tokens/s, and memory at that time (MiB)."""
    run, _, rss_file = spec.partition(":")
    rows = [json.loads(line) for line in (Path(run) / "metrics.jsonl").open()]
    train = [r for r in rows if r["kind"] == "train"]
    if rss_file:
        lines = Path(rss_file).read_text().splitlines()
        samples = [tuple(map(float, line.split())) for line in lines]
        for row in train:  # the last sample at or before the row was written
            row["rss_mb"] = next((m for t, m in reversed(samples) if t <= row["time"]), 0.0)
        peak = max(m for _, m in samples)
    else:
        peak = max(r.get("peak_rss_mb", r.get("rss_mb", 0.0)) for r in train)
    return {"train": train, "peak": peak}


def summarise(label: str, run: dict) -> None:
    speeds = [r["tokens_per_s"] for r in run["train"]]
    median = statistics.median(speeds)
    worst = max(abs(s / median - 1) for s in speeds)
    within = sum(abs(s / median - 1) <= 0.05 for s in speeds)
    tenth = max(1, len(speeds) // 10)
    drift = statistics.mean(speeds[-tenth:]) / statistics.mean(speeds[:tenth]) - 1
    print(
        f"{label:>12}: {len(speeds)} windows, median {median:,.0f} tok/s, "
        f"range {min(speeds):,.0f}-{max(speeds):,.0f}, {within}/{len(speeds)} within 5% "
        f"(worst {worst:+.1%}), last 10% vs first 10% {drift:+.1%}, "
        f"peak {run['peak']:,.0f} MiB"
    )


def draw(runs: dict[str, dict], output: Path) -> None:
    from aiayn.viz import save_figure
    from aiayn.viz.figure import pyplot

    plt = pyplot()
    fig, (speed, memory) = plt.subplots(1, 2, figsize=(12, 4))
    for label, run in runs.items():
        updates = [r["update"] for r in run["train"]]
        speed.plot(updates, [r["tokens_per_s"] for r in run["train"]], label=label)
        memory.plot(updates, [r.get("rss_mb", 0.0) for r in run["train"]], label=label)
    speed.set_title("Training speed (target tokens/s, each 100-update window)")
    memory.set_title("Resident memory (MiB)")
    for ax in (speed, memory):
        ax.set_xlabel("update")
        ax.grid(alpha=0.3)
        ax.legend()
    speed.set_ylim(bottom=0)
    memory.set_ylim(bottom=0)
    print(save_figure(fig, output))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = parser.add_subparsers(dest="action", required=True)
    m = sub.add_parser("measure")
    m.add_argument("--out", type=Path, required=True)
    m.add_argument("command", nargs=argparse.REMAINDER)
    st = sub.add_parser("steady")
    st.add_argument("--out", type=Path, required=True)
    st.add_argument("--minutes", type=float, default=30.0)
    st.add_argument("--window", type=int, default=100, help="updates per window")
    st.add_argument("--pairs", type=int, default=270, help="~4,000 target tokens, as the recipe")
    r = sub.add_parser("report")
    r.add_argument("runs", nargs="+", help="RUN_DIR or RUN_DIR:RSS_FILE")
    r.add_argument("--labels", nargs="+")
    r.add_argument("-o", "--output", type=Path)
    args = parser.parse_args()
    if args.action == "measure":
        command = args.command[1:] if args.command[:1] == ["--"] else args.command
        sys.exit(measure(args.out, command))
    if args.action == "steady":
        if args.minutes <= 0 or args.window < 1 or args.pairs < 1:
            parser.error("--minutes must be above 0, --window and --pairs at least 1")
        steady(args.out, args.minutes, args.window, args.pairs)
        return
    labels = args.labels or args.runs
    runs = {label: load_run(spec) for label, spec in zip(labels, args.runs, strict=True)}
    for label, run in runs.items():
        summarise(label, run)
    if args.output:
        draw(runs, args.output)


if __name__ == "__main__":
    main()
