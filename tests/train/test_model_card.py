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


def test_a_cards_scores_read_back_and_a_students_card_names_its_teacher(tmp_path):
    from aiayn.config import ModelConfig
    from aiayn.store.card import CARD_FILE, ModelCard, Score, read_scores, render_card

    cfg = ModelConfig(d_model=32, n_heads=4, d_ff=64, n_encoder_layers=1, n_decoder_layers=1)
    scores = (
        Score("test2016", "BLEU", 38.44, "nrefs:1|case:mixed|tok:13a|version:2.4.3", "beam 5"),
        Score("valid", "BLEU (greedy)", 12.5, "", "update 900, during training"),
    )
    (tmp_path / CARD_FILE).write_text(
        render_card(ModelCard(scores=scores), cfg, parameters=1, tokenizer=None)
    )
    assert read_scores(tmp_path) == scores  # signatures hold "|"; "-" reads as no signature
    assert read_scores(tmp_path / "nowhere") == ()

    student = render_card(
        ModelCard(teacher="runs/teacher/model", teacher_scores=scores),
        cfg,
        parameters=1,
        tokenizer=None,
    )
    teacher = _section(student, "Teacher")
    assert "A student of the model in `runs/teacher/model`" in teacher
    assert "distilled translations" in teacher
    assert "test BLEU (from its model card): test2016 38.44." in teacher  # not valid's
    unscored = render_card(ModelCard(teacher="t"), cfg, parameters=1, tokenizer=None)
    assert "The teacher's test BLEU is not on its model card." in _section(unscored, "Teacher")
    assert "## Teacher" not in render_card(ModelCard(), cfg, parameters=1, tokenizer=None)
