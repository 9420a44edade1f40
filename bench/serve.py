"""``aiayn serve`` under load, next to offline ``aiayn translate`` of the same sentences.

    python bench/serve.py [--model DIR] [--clients 1 8 32] [--seconds 30]

The server runs in its own process (``aiayn serve`` with its defaults: one decoding process
per core, batches of up to 4,096 source tokens, waiting up to 25 ms); the clients are asyncio
tasks in this process (httpx), each sending one test2016 sentence per request and the next
as soon as the answer comes, for ``--seconds``.
Every answer is compared with the offline translation of that sentence: a different one
counts as a mismatch (the server must never change what a sentence gets), a non-200 answer
or a broken connection as an error.

Offline is ``aiayn translate`` of all the sentences in one batch, timed two ways: the whole
command from start to exit, and its decoding alone (the Translator call, in its own process
after one warm-up pass); the ratio uses decoding alone, the stricter figure. Both sides
decode with beam 5, alpha 0.6, fp32, 2 threads, the tuned allocator (aiayn's default).

``--model``: the trained Multi30k model (``runs/multi30k_en_de_tiny/model`` by default, made
by ``bash scripts/run.sh``). Without one, the main job's recipe is run for ``--updates``
(300 by default), so the model has its shape and outputs of realistic lengths.
"""

from __future__ import annotations

import argparse
import asyncio
import gzip
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parents[1]
DATA = Path(os.environ.get("AIAYN_DATA_DIR", ROOT.parent / "shared" / "data"))
TRAINED = ROOT / "runs" / "multi30k_en_de_tiny" / "model"
ENV = {**os.environ, "OMP_NUM_THREADS": "2", "PYTHONUNBUFFERED": "1"}

OFFLINE = """
import json, sys, time
from aiayn.translate.translator import SearchOptions, Translator
from aiayn.memory import tune_allocator
tune_allocator()
lines = open(sys.argv[2], encoding="utf-8").read().splitlines()
translator = Translator.from_dir(sys.argv[1])
options = SearchOptions(beam=5, alpha=0.6)
translator.translate(lines, options)
start = time.perf_counter()
out = translator.translate(lines, options)
print(json.dumps({"seconds": time.perf_counter() - start, "texts": [h[0].text for h in out]}))
"""


def test_sentences() -> list[str]:
    path = DATA / "multi30k" / "tok" / "test_2016_flickr.lc.norm.tok.en.gz"
    with gzip.open(path, "rt", encoding="utf-8") as f:
        return [line.strip() for line in f if line.strip()]


def briefly_trained_model(work: Path, updates: int) -> Path:
    """A model of the main job's shape: its recipe, stopped after ``updates`` updates."""
    recipe = ROOT / "configs" / "multi30k_en_de_tiny.toml"
    sets = [f"run.max_updates={updates}", "run.valid_bleu=false", "pipeline.test_splits=[]"]
    subprocess.run(
        [sys.executable, "-m", "aiayn", "pipeline", str(recipe), "--work", str(work / "job"),
         *(arg for s in sets for arg in ("--set", s))],
        check=True, env=ENV, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    return work / "job" / "model"


def offline(model: Path, sentences: list[str], work: Path) -> tuple[float, float, list[str]]:
    """Seconds of the whole ``aiayn translate`` command, seconds of decoding alone, and the
    translations."""
    source = work / "test2016.en"
    source.write_text("\n".join(sentences) + "\n", encoding="utf-8")
    start = time.perf_counter()
    subprocess.run(
        [sys.executable, "-m", "aiayn", "translate", "--model", str(model), "--beam", "5",
         "--input", str(source), "--output", str(work / "offline.de")],
        check=True, env=ENV, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    command = time.perf_counter() - start
    found = subprocess.run(
        [sys.executable, "-c", OFFLINE, str(model), str(source)],
        check=True, env=ENV, capture_output=True, text=True,
    )  # fmt: skip
    result = json.loads(found.stdout)
    return command, result["seconds"], result["texts"]


class Server:
    def __init__(self, model: Path):
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            self.url = f"http://127.0.0.1:{s.getsockname()[1]}"
        port = self.url.rsplit(":", 1)[1]
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "aiayn", "serve", "--model", str(model), "--port", port],
            env=ENV,
        )
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            try:
                if httpx.get(self.url + "/health", timeout=1).status_code == 200:
                    return
            except httpx.TransportError:
                time.sleep(0.2)
        raise SystemExit("the server did not start")

    def stop(self) -> None:
        self.proc.terminate()
        self.proc.wait(timeout=120)


async def load(url: str, sentences: list[str], expected: list[str], clients: int, seconds: float):
    """Sentences/s, latencies (s), errors and mismatches of ``clients`` clients."""
    latencies: list[float] = []
    errors = mismatches = 0
    stop = time.monotonic() + seconds

    async def client(index: int, http: httpx.AsyncClient) -> None:
        nonlocal errors, mismatches
        i = index * len(sentences) // clients
        while time.monotonic() < stop:
            body = {"q": sentences[i], "source": "auto", "target": "de"}
            start = time.monotonic()
            try:
                response = await http.post(url + "/translate", json=body)
            except httpx.HTTPError:
                errors += 1
                continue
            latencies.append(time.monotonic() - start)
            if response.status_code != 200:
                errors += 1
            elif response.json()["translatedText"] != expected[i]:
                mismatches += 1
            i = (i + 1) % len(sentences)

    limits = httpx.Limits(max_connections=clients, max_keepalive_connections=clients)
    async with httpx.AsyncClient(timeout=120, limits=limits) as http:
        begin = time.monotonic()
        await asyncio.gather(*(client(c, http) for c in range(clients)))
        elapsed = time.monotonic() - begin
    return len(latencies) / elapsed, latencies, errors, mismatches


def percentile(values: list[float], q: float) -> float:
    return statistics.quantiles(values, n=100, method="inclusive")[q - 1] if len(values) > 1 else 0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--model", type=Path)
    parser.add_argument("--clients", type=int, nargs="+", default=[1, 8, 32])
    parser.add_argument("--seconds", type=float, default=30.0)
    parser.add_argument("--updates", type=int, default=300)
    args = parser.parse_args()
    sentences = test_sentences()
    with tempfile.TemporaryDirectory(prefix="aiayn-serve-") as tmp:
        work = Path(tmp)
        model = args.model or (TRAINED if TRAINED.is_dir() else None)
        if model is None:
            print(f"no trained model: training one of its shape for {args.updates} updates")
            model = briefly_trained_model(work, args.updates)
        command, decoding, expected = offline(model, sentences, work)
        rate = len(sentences) / decoding
        print(f"model {model}, {len(sentences):,} test2016 sentences, allocator: tuned (aiayn)")
        print(f"\n{'':28} {'sent/s':>8} {'p50 ms':>8} {'p99 ms':>8} {'errors':>7} {'mismatch':>9}")
        print(f"{'offline, whole command':28} {len(sentences) / command:>8.1f}")
        print(f"{'offline, decoding alone':28} {rate:>8.1f}")
        server = Server(model)
        try:
            asyncio.run(load(server.url, sentences, expected, 2, 3.0))  # warm-up
            one = None
            for clients in args.clients:
                found = asyncio.run(load(server.url, sentences, expected, clients, args.seconds))
                per_s, latencies, errors, mismatches = found
                one = per_s if clients == 1 else one
                print(
                    f"{f'serve, {clients} clients':28} {per_s:>8.1f} "
                    f"{percentile(latencies, 50) * 1000:>8.0f} "
                    f"{percentile(latencies, 99) * 1000:>8.0f} {errors:>7} {mismatches:>9}"
                    f"   {per_s / rate:.2f}x offline"
                    + (f", {per_s / one:.1f}x one client" if one and clients > 1 else ""),
                    flush=True,
                )
        finally:
            server.stop()


if __name__ == "__main__":
    main()
