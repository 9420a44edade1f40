"""A long training run as a user makes it: its whole time, its memory, and how steady its
training speed stays.

    python bench/long_run.py measure --out DIR -- aiayn pipeline configs/multi30k_en_de_tiny.toml
    python bench/long_run.py report RUN_DIR[:RSS_FILE] ... [--labels before after] [-o PNG]

``measure`` runs the command, samples the resident memory of its whole process tree every
second into ``DIR/rss.tsv`` (seconds since the epoch, MiB) and writes its wall time, exit
status and peak into ``DIR/command.json``. ``report`` reads a run directory's
``metrics.jsonl`` (training speed of each logging window) and the memory samples (given after
a colon, else the run's own ``rss_mb`` column), prints for each run the median speed, the
spread of its windows around the median, the last 10% of windows against the first 10%, and
the peak memory, and draws speed and memory against updates.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path

from common import tree_rss


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
    from aiayn.viz.common import pyplot

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
    r = sub.add_parser("report")
    r.add_argument("runs", nargs="+", help="RUN_DIR or RUN_DIR:RSS_FILE")
    r.add_argument("--labels", nargs="+")
    r.add_argument("-o", "--output", type=Path)
    args = parser.parse_args()
    if args.action == "measure":
        command = args.command[1:] if args.command[:1] == ["--"] else args.command
        sys.exit(measure(args.out, command))
    labels = args.labels or args.runs
    runs = {label: load_run(spec) for label, spec in zip(labels, args.runs, strict=True)}
    for label, run in runs.items():
        summarise(label, run)
    if args.output:
        draw(runs, args.output)


if __name__ == "__main__":
    main()
