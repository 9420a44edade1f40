"""Sequence-level knowledge distillation: ``aiayn distill`` (shards, resume, filters, bad
inputs) and the pipeline's "distill" stage training a student on the teacher's output."""

from __future__ import annotations

import json
import multiprocessing
import os
import shutil
import signal
from pathlib import Path

import pytest

import aiayn.pipeline.distill_stage as distill_module
from aiayn.cli import main
from aiayn.config import DistillConfig, ModelConfig, model_preset
from aiayn.config_io import recipe_from_dict
from aiayn.data import load_prepared
from aiayn.models import build_model
from aiayn.pipeline import STAGES, run_pipeline
from aiayn.pipeline.distill_stage import SHARDS, filter_pairs
from aiayn.store import load_model, save_model
from aiayn.store.card import ModelCard, Score
from aiayn.store.model_dir import read_model_config
from aiayn.train.checkpoint import model_assets
from aiayn.workers.shards import Translated

from .data.corpora import sentences, write_lines

LINES = 20  # source lines: 3 shards of 8 (the last one short)
SHARD = ["--shard-lines", "8", "--beam", "2", "--precision", "fp32"]


def _corpus(root: Path) -> Path:
    """Sentences of the tiny model's words, one repeated, one line empty."""
    lines = sentences(LINES - 2, seed=5, max_len=8)
    return write_lines(root / "mono.src", [*lines[:6], "", lines[0], *lines[6:]])


def _distill(teacher: Path, source: Path, out: Path, *extra: str) -> int:
    return main(["distill", str(teacher), str(source), "--out", str(out), *SHARD, *extra])


def _files(out: Path) -> dict[str, bytes]:
    """Every file under ``out`` by its relative path (temporary files included)."""
    return {str(p.relative_to(out)): p.read_bytes() for p in sorted(out.rglob("*")) if p.is_file()}


@pytest.fixture(scope="module")
def distilled(trained_model_dir, tmp_path_factory) -> tuple[Path, Path]:
    """The tiny teacher's distillation of ``_corpus`` in two processes: (source, out)."""
    root = tmp_path_factory.mktemp("distilled")
    source = _corpus(root)
    assert _distill(trained_model_dir, source, root / "out", "--workers", "2") == 0
    return source, root / "out"


def test_distill_writes_shards_and_the_filtered_corpus(distilled, capsys):
    source, out = distilled
    assert sorted(p.name for p in (out / SHARDS).iterdir()) == [
        "000000.jsonl",
        "000001.jsonl",
        "000002.jsonl",
    ]
    rows = [json.loads(line) for p in sorted((out / SHARDS).iterdir()) for line in p.open()]
    assert [r["source"] for r in rows] == source.read_text().splitlines()
    src = (out / "train.src").read_text().splitlines()
    tgt = (out / "train.tgt").read_text().splitlines()
    assert len(src) == len(tgt) == LINES - 2  # the empty line and the repeat dropped
    assert all(s and t for s, t in zip(src, tgt, strict=True))
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["work"]["decode"]["beam"] == 2 and manifest["work"]["languages"] == [
        "src",
        "tgt",
    ]


def test_the_teacher_output_is_its_beam_search(distilled, trained_model_dir):
    from aiayn.translate.translator import SearchOptions, Translator

    _, out = distilled
    rows = [json.loads(line) for line in (out / SHARDS / "000000.jsonl").open()]
    translator = Translator.from_dir(trained_model_dir)
    options = SearchOptions(text="raw", beam=2)
    expected = translator.translate([r["source"] for r in rows], options)
    assert [r["translation"] for r in rows] == [h[0].text for h in expected]


@pytest.mark.slow  # three runs, two of them starting a decoding process
def test_a_run_killed_between_shards_resumes_to_identical_files(
    distilled, trained_model_dir, tmp_path, monkeypatch
):
    source, finished = distilled
    out = tmp_path / "out"
    real = distill_module.translate_shards
    taken: list[list[int]] = []

    def killed_after_one(spec, shards, options, *, workers):
        shards = list(shards)
        taken.append([k for k, _ in shards])
        for n, shard in enumerate(real(spec, shards, options, workers=workers)):
            if n == 1 and len(taken) == 1:
                raise KeyboardInterrupt  # killed after one shard was written
            yield shard

    monkeypatch.setattr(distill_module, "translate_shards", killed_after_one)
    assert _distill(trained_model_dir, source, out, "--workers", "1") == 130
    written = sorted(p.name for p in (out / SHARDS).iterdir())
    assert len(written) == 1 and not (out / "train.src").exists()
    for name in (written[0], "000002.jsonl"):  # what writers killed half-way left
        (out / SHARDS / f".{name}.tmp-999999999-0").write_text("half a shard")
    assert _distill(trained_model_dir, source, out, "--workers", "1") == 0
    assert len(taken) == 2 and len(taken[1]) == 2  # only the two shards missing
    assert set(taken[0]) - set(taken[1]) == {int(written[0][:6])}
    assert _files(out) == _files(finished)
    assert _distill(trained_model_dir, source, out) == 0  # nothing left: no process started
    assert len(taken) == 2 and _files(out) == _files(finished)


@pytest.mark.slow  # three decoding processes start
def test_a_killed_decoding_process_is_one_line_and_the_rerun_resumes(
    distilled, trained_model_dir, tmp_path, monkeypatch, capsys
):
    """A pool process SIGKILLed (as the out-of-memory killer does) fails the run in one line
    with exit 2, not a wait for ever; the shard finished before stays, and a rerun translates
    only the others, to the same files."""
    source, finished = distilled
    out = tmp_path / "out"
    real = distill_module.translate_shards

    def killed_after_one(spec, shards, options, *, workers):
        first, *rest = list(shards)
        yield from real(spec, [first], options, workers=1)
        before = {p.pid for p in multiprocessing.active_children()}

        def killing():  # read by the second pool once its process has started
            for p in multiprocessing.active_children():
                if p.pid not in before:
                    os.kill(p.pid, signal.SIGKILL)
            yield from rest

        yield from real(spec, killing(), options, workers=1)

    monkeypatch.setattr(distill_module, "translate_shards", killed_after_one)
    capsys.readouterr()
    assert _distill(trained_model_dir, source, out, "--workers", "1") == 2
    err = capsys.readouterr().err.strip()  # the progress log, then the error
    errors = [line for line in err.splitlines() if "error" in line]
    assert "Traceback" not in err and errors == [err.splitlines()[-1]]
    assert errors[0].startswith("aiayn distill: error:") and "was killed by SIGKILL" in err
    assert "1 finished shard(s) kept" in err and "run again to resume" in err
    assert sorted(p.name for p in (out / SHARDS).iterdir()) == ["000000.jsonl"]
    monkeypatch.setattr(distill_module, "translate_shards", real)
    assert _distill(trained_model_dir, source, out, "--workers", "1") == 0
    assert _files(out) == _files(finished)


def test_other_settings_are_refused_in_one_line_or_restarted(
    distilled, trained_model_dir, tmp_path, capsys
):
    source, finished = distilled
    out = tmp_path / "out"
    shutil.copytree(finished, out)
    capsys.readouterr()
    assert _distill(trained_model_dir, source, out, "--alpha", "1.0") == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and "another decoding setting" in err and "--restart" in err
    (out / SHARDS / "000001.jsonl").write_text("stale")
    restart = ["--alpha", "1.0", "--restart", "--workers", "1"]
    assert _distill(trained_model_dir, source, out, *restart) == 0
    assert json.loads((out / "manifest.json").read_text())["work"]["decode"]["alpha"] == 1.0
    assert "stale" not in (out / SHARDS / "000001.jsonl").read_text()


def _row(source: str, translation: str, score: float = -0.5, pieces=(4, 4)) -> Translated:
    return Translated(source, translation, score, *pieces)


def test_filters_count_each_dropped_line_once():
    rows = [
        _row("a b", "b a"),
        _row("", ""),  # empty source
        _row("a", ""),  # empty translation
        _row("a b", "b a b a b a b a", pieces=(3, 10)),  # 10 > 3 * 3
        _row("c d", "d c", pieces=(10, 3)),  # the other way round
        _row("c", "c", score=-2.5),  # under the score
        _row("a b", "b a"),  # a duplicate
        _row("a b", "a b"),  # same source, another translation: kept
    ]
    kept, counts = filter_pairs(rows, DistillConfig(max_ratio=3.0, min_score=-2.0))
    assert kept == [("a b", "b a"), ("a b", "a b")]
    assert (counts.lines, counts.kept) == (8, 2)
    assert (counts.empty, counts.ratio, counts.score, counts.duplicate) == (2, 2, 1, 1)
    kept, counts = filter_pairs(rows, DistillConfig(max_ratio=4.0, min_score=-3.0, dedupe=False))
    assert len(kept) == 6 and counts.empty == 2 and counts.kept == 6


def _language_model(root: Path) -> Path:
    cfg = ModelConfig(
        src_vocab_size=0,
        tgt_vocab_size=40,
        d_model=16,
        n_heads=2,
        d_ff=32,
        n_encoder_layers=0,
        n_decoder_layers=1,
    )
    return save_model(build_model(cfg), cfg, root / "lm")


@pytest.mark.parametrize(
    "case, words",
    [
        ("language model", "a language model"),
        ("other pair", "translates src-tgt, not the de-tgt"),
        ("empty corpus", "no text to distil"),
        ("missing corpus", "no-such.src"),
        ("missing teacher", "no such model directory"),
        ("foreign directory", "not a distillation's"),
    ],
)
def test_bad_inputs_get_one_line(case, words, trained_model_dir, tmp_path, capsys):
    teacher, source, out = trained_model_dir, _corpus(tmp_path), tmp_path / "out"
    extra: list[str] = []
    if case == "language model":
        teacher = _language_model(tmp_path)
    elif case == "other pair":
        extra = ["--src-lang", "de"]
    elif case == "empty corpus":
        source = write_lines(tmp_path / "empty.src", ["", "  "])
    elif case == "missing corpus":
        source = tmp_path / "no-such.src"
    elif case == "missing teacher":
        teacher = tmp_path / "nowhere"
    else:
        out.mkdir()
        (out / "notes.txt").write_text("mine")
    assert _distill(teacher, source, out, *extra) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and err.startswith("aiayn distill: error:") and words in err


def test_student_presets_are_deep_encoders_over_shallow_decoders():
    for name in ("student_bergamot", "student_tiny"):
        cfg = model_preset(name, src_vocab_size=50, tgt_vocab_size=50)
        assert cfg.n_encoder_layers > cfg.n_decoder_layers
        model = build_model(cfg)
        assert len(model.encoder.layers) == cfg.n_encoder_layers
        assert len(model.decoder.layers) == cfg.n_decoder_layers
    teacher = model_preset("tiny")
    student = model_preset("student_tiny")
    assert (student.d_model, student.d_ff, student.n_heads) == (
        teacher.d_model,
        teacher.d_ff,
        teacher.n_heads,
    )


def _teacher_with_test_scores(trained_model_dir: Path, where: Path) -> Path:
    """The tiny teacher in a directory of its own, its card holding two test sets' scores."""
    model, cfg = load_model(trained_model_dir)
    scores = (
        Score("test2016", "BLEU", 38.44, "nrefs:1|case:mixed|tok:13a", "beam 5, α 0.6"),
        Score("test2016", "chrF", 64.1, "nrefs:1|case:mixed", "beam 5, α 0.6"),
        Score("test2017", "BLEU", 31.07, "nrefs:1|case:mixed|tok:13a", "beam 5, α 0.6"),
    )
    assets = model_assets(trained_model_dir)
    return save_model(model, cfg, where, assets=assets, card=ModelCard(scores=scores))


@pytest.mark.slow  # distils, trains a student and decodes its test set in a process
def test_a_student_trains_on_the_teachers_translations(trained_model_dir, tmp_path):
    teacher = _teacher_with_test_scores(trained_model_dir, tmp_path / "teacher")
    corpus = tmp_path / "corpus"
    write_lines(corpus.with_name("corpus.src"), sentences(40, seed=9, max_len=8))
    write_lines(corpus.with_name("corpus.tgt"), ["x"] * 40)  # references the student never sees
    recipe = recipe_from_dict(
        {
            "pipeline": {
                "dataset": "files",
                "src_lang": "src",
                "tgt_lang": "tgt",
                "train": "corpus",
                "valid": "corpus",
                "test": ["corpus"],
                "test_limit": 4,
                "beam": 1,
                "average_last": 1,
                "calibrate": False,
                "distill": {"teacher": str(teacher), "shard_lines": 16, "workers": 1},
            },
            "prepare": {"vocab_from": str(teacher)},
            "model": {
                "preset": "student_tiny",
                "d_model": 32,
                "d_ff": 64,
                "n_encoder_layers": 2,
                "n_decoder_layers": 1,
            },
            "data": {"max_tokens": 256},
            "run": {"max_updates": 4, "save_every": 4, "valid_every": 4, "threads": 1},
        },
        recipe_dir=str(tmp_path),
    )
    result = run_pipeline(recipe, tmp_path / "work", recipe_dir=tmp_path)
    assert result.updates == 4 and list(result.stage_seconds)[:2] == ["corpus", "distill"]
    assert "model card" in result.stage_seconds
    distilled = (tmp_path / "work" / "distilled" / "train.tgt").read_text().splitlines()
    assert distilled and "x" not in distilled
    data = load_prepared(tmp_path / "work" / "data")
    assert data.manifest["vocab"]["from_model"]["path"] == str(teacher)
    assert data.manifest["splits"]["train"]["pairs"] == len(distilled)
    student = read_model_config(tmp_path / "work" / "run" / "best")
    assert (student.n_encoder_layers, student.n_decoder_layers) == (2, 1)
    card = (tmp_path / "work" / "model" / "README.md").read_text()
    said = card.split("## Teacher\n", 1)[1].split("\n## ", 1)[0]
    assert f"A student of the model in `{teacher}`" in said
    assert "trained on the teacher's distilled translations" in said
    assert "The teacher's test BLEU (from its model card): test2016 38.44, test2017 31.07." in said


def test_the_multi30k_student_recipe_distils_the_main_model():
    from aiayn.config_io import load_toml

    recipe_file = Path(__file__).parents[1] / "configs" / "multi30k_en_de_student.toml"
    recipe = recipe_from_dict(
        load_toml(str(recipe_file)), where="recipe", recipe_dir=str(recipe_file.parent)
    )
    teacher = (recipe_file.parent / "../runs/multi30k_en_de_tiny_raw/model").resolve()
    assert Path(recipe.pipeline.distill.teacher).resolve() == teacher
    assert Path(recipe.prepare["vocab_from"]).resolve() == teacher  # the teacher's tokenizer
    assert (recipe.pipeline.src_lang, recipe.pipeline.tgt_lang) == ("en", "de")
    model, tiny = recipe.train.model, model_preset("tiny")
    assert (model.n_encoder_layers, model.n_decoder_layers, model.d_model) == (6, 1, tiny.d_model)
    assert recipe.pipeline.distill.decode.beam == 5 and recipe.pipeline.distill.decode.text == "raw"


def test_the_pipeline_refuses_a_teacher_of_another_pair_in_one_line(trained_model_dir, tmp_path):
    from aiayn.pipeline.distill_stage import DistillError

    write_lines(tmp_path / "corpus.en", ["a b"])
    write_lines(tmp_path / "corpus.de", ["b a"])
    recipe = recipe_from_dict(
        {
            "pipeline": {
                "dataset": "files",
                "train": "corpus",
                "valid": "corpus",
                "distill": {"teacher": str(trained_model_dir)},
            }
        },
        recipe_dir=str(tmp_path),
    )
    stages = tuple(s for s in STAGES if s.name in ("corpus", "distill", "train"))
    with pytest.raises(DistillError, match="translates src-tgt, not the en-de asked for"):
        run_pipeline(recipe, tmp_path / "work", stages=stages, recipe_dir=tmp_path)


def test_a_calibrated_teacher_scores_on_the_documented_scale(
    distilled, trained_model_dir, tmp_path
):
    """A teacher with ``calibration.json`` gives the same shard scores (the mean
    log-probability per piece, as ``--min-score`` is documented) as without one."""
    from aiayn.translate.calibration import Calibration, write_calibration

    source, plain = distilled
    teacher = tmp_path / "teacher"
    shutil.copytree(trained_model_dir, teacher)
    write_calibration(teacher, Calibration(slope=0.5, intercept=2.0, lines=60))
    assert _distill(teacher, source, tmp_path / "out") == 0
    for shard in sorted((plain / SHARDS).iterdir()):
        assert (tmp_path / "out" / SHARDS / shard.name).read_bytes() == shard.read_bytes()
