"""Model cards: the README.md of every model directory aiayn writes says what the model is,
what it was trained on (with checksums), how, how well it scores, and its licence."""

from __future__ import annotations

import json
import re

from aiayn.cli import main
from aiayn.files import sha256_file
from aiayn.store import load_model

from .conftest import config_dict, write_toml


def _section(card: str, title: str) -> str:
    return card.split(f"## {title}\n", 1)[1].split("\n## ", 1)[0]


def test_a_trained_and_an_averaged_model_carry_their_card(tiny_dataset, tmp_path):
    run = {"max_updates": 6, "valid_every": 3, "save_every": 3, "valid_bleu": True}
    config = write_toml(tmp_path / "t.toml", config_dict(tiny_dataset, tmp_path / "run", run=run))
    assert main(["train", str(config), "--set", "run.seed=4"]) == 0
    card = (tmp_path / "run" / "best" / "README.md").read_text()
    model, _ = load_model(tmp_path / "run" / "best")

    model_rows = _section(card, "Model")
    assert f"| {sum(p.numel() for p in model.parameters()):,} |" in model_rows
    assert "2 + 2 layers" in model_rows and "32 / 4 / 64" in model_rows
    assert "60 ids" in model_rows and "spm.model" in model_rows

    manifest = json.loads((tiny_dataset / "manifest.json").read_text())
    data = _section(card, "Data")
    for split, stats in manifest["splits"].items():
        for side in ("src", "tgt"):
            path, pairs, pieces = stats["files"][side], stats["pairs"], stats[f"{side}_tokens"]
            row = f"`{path}` | {pairs:,} | {pieces:,} | `{sha256_file(path)}`"
            assert row in data, (split, side)
    assert data.strip().startswith("Domain: not recorded.")  # a training run knows no domain

    training = _section(card, "Training")
    assert f"Command: `aiayn train {config} --set run.seed=4`" in training
    saved = json.loads(training.split("```json\n", 1)[1].split("```", 1)[0])
    assert saved["run"]["seed"] == 4 and saved["model"]["d_model"] == 32

    scores = _section(card, "Scores")
    metrics = [json.loads(line) for line in (tmp_path / "run" / "metrics.jsonl").open()]
    ppl = re.search(r"\| valid \| perplexity \| ([\d.]+) \| update (\d+),", scores)
    best = next(r for r in metrics if r["kind"] == "valid" and r["update"] == int(ppl[2]))
    assert f"{best['ppl']:.2f}" == ppl[1]
    bleu = re.search(r"\| valid \| BLEU \(greedy\) \| [\d.]+ \| [^|]+ \| `([^`]+)` \|", scores)
    assert bleu and bleu.group(1).startswith("nrefs:1|case:mixed|eff:no|tok:13a")
    assert "Not stated" in _section(card, "Licence")
    limits = _section(card, "Known limits")
    assert "Translates src to tgt only. A paragraph is cut into sentences" in limits
    assert "Not for text unlike that data:" in limits

    assert (
        main(["average", str(tmp_path / "run"), "--last", "2", "--out", str(tmp_path / "avg")]) == 0
    )
    averaged = (tmp_path / "avg" / "README.md").read_text()
    assert "The average of the weights of 2 checkpoints (step_00000003 .. step_00000006)" in (
        averaged
    )
    assert _section(averaged, "Data") == data
    assert f"aiayn average {tmp_path / 'run'} --last 2" in _section(averaged, "Training")
