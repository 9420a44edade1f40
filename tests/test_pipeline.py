"""A short run of the whole pipeline on a slice of the real Multi30k."""

import json
import shutil
from pathlib import Path
from types import SimpleNamespace

import pytest

from aiayn.cli.pipeline import format_results
from aiayn.config import PipelineConfig
from aiayn.config_io import load_toml, recipe_from_dict
from aiayn.files import sha256_file
from aiayn.pipeline import STAGES, Job, Stage, default_corpus_dir, run_pipeline
from aiayn.pipeline.stages import averaged_checkpoints, training_minutes
from aiayn.train.checkpoint import TRAINER_FILE, checkpoint_dir
from aiayn.train.run_dir import RunDirectoryError

from .data.corpora import make_corpus, sentences, write_lines
from .train.conftest import Messages

REPO = Path(__file__).resolve().parents[1]


def _smoke_recipe(tmp_path):
    return recipe_from_dict(
        {
            "pipeline": {
                "test_splits": ["test_2016_flickr"],
                "test_limit": 60,
                "beam": 2,
                "tune_alpha": [0.6, 1.2],
                "average_last": 2,
                "examples": 2,
            },
            "prepare": {"vocab_size": 700, "train_limit": 800},
            "model": {
                "d_model": 64,
                "n_heads": 4,
                "d_ff": 128,
                "n_encoder_layers": 2,
                "n_decoder_layers": 2,
                "dropout": 0.1,
            },
            "data": {"max_tokens": 1024},
            "optim": {"schedule": "inverse_sqrt", "lr": 0.003, "warmup_steps": 30},
            "run": {
                "max_updates": 90,
                "save_every": 30,
                "valid_every": 45,
                "log_every": 30,
                "precision": "auto",  # as the recipe: bf16 only on bfloat16 hardware
            },
        }
    )


@pytest.mark.slow
def test_every_stage_produces_its_files_and_a_score(tmp_path, multi30k_dir):
    recipe = _smoke_recipe(tmp_path)
    result = run_pipeline(recipe, tmp_path / "work", corpus_from=multi30k_dir)
    work = tmp_path / "work"
    assert (work / "multi30k" / "tok" / "train.lc.norm.tok.de.gz").is_file()
    manifest = json.loads((work / "data" / "manifest.json").read_text())
    assert manifest["splits"]["train"]["pairs"] == 800 and manifest["pretokenized"]
    assert len(list((work / "run" / "checkpoints").iterdir())) == 3
    assert (work / "model" / "model.safetensors").is_file()
    hyps = (work / "results" / "test_2016_flickr.de.hyp").read_text().splitlines()
    assert len(hyps) == 60
    [test] = result.tests
    assert test.bleu > 0 and "tok:none" in test.bleu_signature
    assert set(result.alpha_scores) == {0.6, 1.2}
    assert result.alpha_scores[result.alpha] == max(result.alpha_scores.values())
    assert json.loads((work / "results.json").read_text())["updates"] == 90
    assert list(result.stage_seconds) == [  # every stage the recipe asks for, timed, in order
        "corpus",
        "prepare",
        "train",
        "average",
        "load model",
        "tune length penalty",
        "calibrate confidence",
        "translate and score",
        "model card",
    ]
    assert all(seconds >= 0 for seconds in result.stage_seconds.values())
    assert sum(result.stage_seconds.values()) <= result.total_seconds
    table = format_results(result, recipe)
    assert "| test_2016_flickr |" in table and "tokens/s" in table
    assert f"-> α {result.alpha}" in table

    messages = Messages()
    again = run_pipeline(recipe, work, corpus_from=multi30k_dir, reporter=messages)
    assert again.updates == 90  # a finished run is reused, not retrained
    assert f"reusing {work / 'data'}" in messages and f"reusing {work / 'model'}" in messages


def _own_corpus_recipe(tmp_path, max_updates: int = 40) -> Path:
    """A recipe of ``dataset = "files"`` over a three-file corpus, relative paths."""
    make_corpus(tmp_path / "corpus", train=400, gz=True)
    recipe_file = tmp_path / "recipes" / "mine.toml"
    recipe_file.parent.mkdir()
    recipe_file.write_text(
        "[pipeline]\n"
        'dataset = "files"\nsrc_lang = "src"\ntgt_lang = "tgt"\n'
        'train = "../corpus/train"\nvalid = "../corpus/valid"\ntest = ["../corpus/test"]\n'
        "pretokenized = true\naverage_last = 2\nbeam = 2\n"
        "[prepare]\nvocab_size = 60\n"
        "[model]\nd_model = 32\nn_heads = 4\nd_ff = 64\nn_encoder_layers = 2\n"
        "n_decoder_layers = 2\n"
        '[optim]\nschedule = "inverse_sqrt"\nlr = 0.003\nwarmup_steps = 10\n'
        f"[run]\nmax_updates = {max_updates}\nsave_every = 20\nvalid_every = 40\n"
        "log_every = 20\n"
    )
    return recipe_file


@pytest.mark.slow
def test_your_own_three_file_corpus_runs_through_the_pipeline(tmp_path):
    """``dataset = "files"``: train, valid and test prefixes relative to the recipe."""
    recipe_file = _own_corpus_recipe(tmp_path)
    values = load_toml(str(recipe_file))
    recipe = recipe_from_dict(values)
    work = tmp_path / "work"
    result = run_pipeline(recipe, work, recipe_dir=recipe_file.parent)
    [test] = result.tests
    assert test.split == "test" and test.sentences == 30 and "tok:none" in test.bleu_signature
    assert len((work / "results" / "test.tgt.hyp").read_text().splitlines()) == 30
    manifest = json.loads((work / "data" / "manifest.json").read_text())
    assert manifest["splits"]["train"]["pairs"] == 400
    assert run_pipeline(recipe, work, recipe_dir=recipe_file.parent).updates == 40  # resumable

    # a dataset prepared before an option existed counts it at its default: still current
    path = work / "data" / "manifest.json"
    older = json.loads(path.read_text())
    del older["options"]["vocab_from"]
    path.write_text(json.dumps(older))
    messages = Messages()
    run_pipeline(recipe, work, recipe_dir=recipe_file.parent, reporter=messages)
    assert f"reusing {work / 'data'}" in messages

    def count_lines(job: Job) -> None:  # a stage after "translate and score"
        hyps = job.work / "results" / "test.tgt.hyp"
        (job.work / "lines.txt").write_text(str(len(hyps.read_text().splitlines())))

    extra = Stage("count lines", "lines.txt", count_lines, done=lambda job: False)
    again = run_pipeline(recipe, work, recipe_dir=recipe_file.parent, stages=(*STAGES, extra))
    assert (work / "lines.txt").read_text() == "30" and list(again.stage_seconds)[-1] == extra.name

    data = (work / "data" / "manifest.json").read_bytes()
    changed = recipe_from_dict({**values, "prepare": {"vocab_size": 50}})
    with pytest.raises(RunDirectoryError, match="vocab_size = 60, the recipe now says 50"):
        run_pipeline(changed, work, recipe_dir=recipe_file.parent)
    assert (work / "data" / "manifest.json").read_bytes() == data  # not prepared again


@pytest.mark.slow
def test_text_changed_under_the_same_path_is_prepared_again_or_refused(tmp_path):
    """The dataset records its text's digests: a run with checkpoints refuses text that
    changed under it (naming the file); without checkpoints the text is prepared again."""
    recipe_file = _own_corpus_recipe(tmp_path, max_updates=20)
    recipe, work = recipe_from_dict(load_toml(str(recipe_file))), tmp_path / "work"
    run_pipeline(recipe, work, recipe_dir=recipe_file.parent)
    train_src = tmp_path / "corpus" / "train.src.gz"
    write_lines(train_src.with_suffix(""), sentences(400, seed=7), gz=True)
    data = (work / "data" / "manifest.json").read_bytes()

    with pytest.raises(RunDirectoryError, match=r"train\.src\.gz as it was, and its text has"):
        run_pipeline(recipe, work, recipe_dir=recipe_file.parent)
    assert (work / "data" / "manifest.json").read_bytes() == data  # not prepared again

    shutil.rmtree(work / "run")
    messages = Messages()
    run_pipeline(recipe, work, recipe_dir=recipe_file.parent, reporter=messages)
    assert any("train.src.gz changed since" in line for line in messages)
    digest = json.loads((work / "data" / "manifest.json").read_text())["splits"]["train"]
    assert digest["text_sha256"]["src"] == sha256_file(train_src)


def test_named_corpora_are_looked_for_where_the_user_says(tmp_path, monkeypatch):
    """An explicit directory, else $AIAYN_DATA_DIR, else ../shared/data from the current
    directory; a directory without the corpus's marker file means download (None)."""
    for root in ("explicit", "env", "shared/data"):
        (tmp_path / root / "multi30k").mkdir(parents=True)
        (tmp_path / root / "multi30k" / "train.en.gz").write_bytes(b"")
    monkeypatch.chdir(tmp_path / "explicit")  # ../shared/data from here is tmp_path/shared/data
    monkeypatch.setenv("AIAYN_DATA_DIR", str(tmp_path / "env"))
    assert default_corpus_dir("multi30k", tmp_path / "explicit") == tmp_path / "explicit/multi30k"
    assert default_corpus_dir("multi30k") == tmp_path / "env" / "multi30k"
    assert default_corpus_dir("wmt14") is None  # no copy there: download
    assert default_corpus_dir("files") is None
    monkeypatch.delenv("AIAYN_DATA_DIR")
    assert default_corpus_dir("multi30k").resolve() == (tmp_path / "shared/data/multi30k").resolve()


@pytest.mark.slow
def test_a_recipe_can_start_from_a_model_and_its_card_records_the_test_scores(
    tmp_path, trained_model_dir
):
    """``run.init_from`` in a recipe (relative to it): the corpus is encoded with the
    model's tokenizers, training starts from its weights, and the final model's card holds
    the test scores with their signatures."""
    recipe_file = _own_corpus_recipe(tmp_path)
    shutil.copytree(trained_model_dir, tmp_path / "base")
    tuned_file = recipe_file.with_name("tuned.toml")
    tuned_file.write_text(
        'extends = "mine.toml"\n'
        "[model]\ndropout = 0.0\n"  # the rest of [model] is the base model's, as mine.toml's
        '[run]\ninit_from = "../base"\nmax_updates = 10\nsave_every = 5\n'
    )
    messages = Messages()
    recipe = recipe_from_dict(load_toml(str(tuned_file)), recipe_dir=str(tuned_file.parent))
    work = tmp_path / "tuned"
    result = run_pipeline(recipe, work, recipe_dir=tuned_file.parent, reporter=messages)
    assert result.updates == 10
    assert f"starting from the weights of {recipe_file.parent / '../base'}" in "\n".join(messages)
    assert sha256_file(work / "data" / "spm.model") == sha256_file(tmp_path / "base" / "spm.model")
    card = (work / "model" / "README.md").read_text()
    assert f"Fine-tuned from the model in `{recipe_file.parent / '../base'}`" in card
    [test] = result.tests
    assert f"| test | BLEU | {test.bleu:.2f} | beam 2, α 0.6 | `{test.bleu_signature}` |" in card
    assert f"| test | chrF | {test.chrf:.2f} | beam 2, α 0.6 | `{test.chrf_signature}` |" in card


@pytest.mark.slow
def test_empty_translations_are_warned_about_and_the_card_says_so(tmp_path):
    """A test set whose sources are blank lines gets empty translations of its non-empty
    references: the log, the results and the model card say so next to BLEU 0."""
    recipe_file = _own_corpus_recipe(tmp_path)
    write_lines(tmp_path / "corpus" / "test.src", [""] * 30, gz=True)
    recipe = recipe_from_dict(load_toml(str(recipe_file)))
    messages = Messages()
    work = tmp_path / "work"
    result = run_pipeline(recipe, work, recipe_dir=recipe_file.parent, reporter=messages)
    [test] = result.tests
    assert test.bleu == 0 and test.outputs.empty == 30
    assert "test: warning: 30 empty of 30 translations" in messages
    assert "test: warning: 30 empty of 30 translations" in format_results(result, recipe)
    limits = (work / "model" / "README.md").read_text().split("## Known limits\n", 1)[1]
    assert "test test set were mostly unusable (30 empty of 30 translations)" in limits


def _stage_job(tmp_path, confidences, chrf_like):
    """A job whose validation split's translations (a stub translator) have ``confidences``
    and are word-for-word the references where ``chrf_like`` is True, else unrelated."""
    from types import SimpleNamespace

    from aiayn.config import PipelineConfig
    from aiayn.translate.terms import Translation

    tmp_path.mkdir(exist_ok=True)
    refs = [f"der {w} läuft durch den park nummer {n}" for n, w in enumerate(["hund"] * 60)]
    write_lines(tmp_path / "valid.en", [f"line {n}" for n in range(60)])
    write_lines(tmp_path / "valid.de", refs)
    outputs = [r if good else "xq zv" for r, good in zip(refs, chrf_like, strict=True)]

    def translate(lines, options):
        assert options.nbest == 1 and options.min_confidence == 0
        return [[Translation(o, 0.0, [1], c)] for o, c in zip(outputs, confidences, strict=True)]

    (tmp_path / "model").mkdir(parents=True)
    messages = Messages()
    return SimpleNamespace(
        p=PipelineConfig(dataset="files", train="x", valid="x"),
        corpus=SimpleNamespace(valid=str(tmp_path / "valid")),
        translator=SimpleNamespace(translate=translate),
        model_dir=tmp_path / "model",
        alpha=0.6,
        log=messages.log,
        messages=messages,
    )


def test_the_calibration_stage_fits_the_validation_split_or_says_why_not(tmp_path):
    from aiayn.pipeline.calibrate_stage import calibrate_confidence
    from aiayn.translate.calibration import read_calibration

    good = [n % 2 == 0 for n in range(60)]
    job = _stage_job(tmp_path, [0.9 if g else 0.3 for g in good], good)
    calibrate_confidence(job)
    calibration = read_calibration(job.model_dir)
    assert calibration is not None and calibration.lines == 60
    assert calibration(0.9) > 0.8 and calibration(0.3) < 0.2  # the chrF each kind scores
    assert any("confidence calibrated" in m for m in job.messages)
    backwards = _stage_job(tmp_path / "b", [0.3 if g else 0.9 for g in good], good)
    calibrate_confidence(backwards)
    assert read_calibration(backwards.model_dir) is None
    assert any("not calibrated" in m and "does not rank" in m for m in backwards.messages)


def test_the_shortlist_stage_ships_the_table_the_test_sets_decode_with(tmp_path):
    """``shortlist_table``: the model directory gets the lexical table of the training
    corpus (the one ``aiayn shortlist`` builds from it), kept through the model card's
    rewrite, the test set decodes with ``shortlist``, and a rerun reuses the table."""
    import torch

    from aiayn.store.model_dir import read_model_config
    from aiayn.translate.shortlist_table import SHORTLIST_FILE, build_shortlist, load_shortlist

    recipe_file = _own_corpus_recipe(tmp_path, max_updates=20)
    values = load_toml(str(recipe_file))
    values["pipeline"] |= {"shortlist_table": 12, "shortlist": 6, "calibrate": False}
    recipe = recipe_from_dict(values)
    work = tmp_path / "work"
    result = run_pipeline(recipe, work, recipe_dir=recipe_file.parent)
    stages = list(result.stage_seconds)
    assert stages[stages.index("average") + 1 : stages.index("average") + 3] == [
        "shortlist",
        "load model",
    ]
    [test] = result.tests
    assert test.sentences == 30
    cfg = read_model_config(work / "model")
    table = load_shortlist(work / "model", cfg.src_vocab_size, cfg.tgt_vocab_size)
    assert table is not None and table.per_source == 12

    by_hand = tmp_path / "by-hand"
    shutil.copytree(work / "model", by_hand)
    (by_hand / SHORTLIST_FILE).unlink()
    corpus = tmp_path / "corpus"
    build_shortlist(
        by_hand, corpus / "train.src.gz", corpus / "train.tgt.gz", best=12, frequent=100, raw=True
    )
    same = load_shortlist(by_hand, cfg.src_vocab_size, cfg.tgt_vocab_size)
    assert same is not None and torch.equal(table.best, same.best)
    assert torch.equal(table.frequent, same.frequent)

    messages = Messages()
    upto = ("corpus", "prepare", "train", "average", "shortlist")
    again = tuple(s for s in STAGES if s.name in upto)
    run_pipeline(recipe, work, recipe_dir=recipe_file.parent, reporter=messages, stages=again)
    assert f"reusing {work / 'model' / SHORTLIST_FILE}" in messages, "\n".join(messages.lines)
    values["pipeline"]["shortlist_table"] = 8  # other sizes: built again
    run_pipeline(recipe_from_dict(values), work, recipe_dir=recipe_file.parent, stages=again)
    assert load_shortlist(work / "model", cfg.src_vocab_size, cfg.tgt_vocab_size).per_source == 8


def test_a_recipe_that_decodes_with_a_shortlist_builds_a_table_large_enough(tmp_path):
    from aiayn.errors import ConfigError

    values = load_toml(str(_own_corpus_recipe(tmp_path)))
    for table in (0, 5):
        values["pipeline"] |= {"shortlist": 6, "shortlist_table": table}
        with pytest.raises(ConfigError, match="set shortlist_table to at least 6"):
            recipe_from_dict(values)


@pytest.mark.parametrize("bad", [-1, 2.5, "many"])
def test_a_shortlist_table_size_that_is_no_count_is_refused(tmp_path, bad):
    from aiayn.errors import ConfigError

    values = load_toml(str(_own_corpus_recipe(tmp_path)))
    values["pipeline"]["shortlist_table"] = bad
    with pytest.raises(ConfigError, match="shortlist_table"):
        recipe_from_dict(values)


def test_the_average_takes_the_checkpoints_of_the_budget_s_last_share(tmp_path):
    """``average_share``: the checkpoints saved in that last share of the run's progress
    (the last one at least, where none was); ``average_last`` otherwise."""
    for update, progress in ((100, 0.5), (200, 0.8), (300, 0.86), (400, 0.93), (500, 1.0)):
        checkpoint = checkpoint_dir(tmp_path / "run", update)
        checkpoint.mkdir(parents=True)
        (checkpoint / TRAINER_FILE).write_text(json.dumps({"update": update, "progress": progress}))

    def averaged(**fields) -> list[str]:
        job = SimpleNamespace(run_dir=tmp_path / "run", p=PipelineConfig(**fields))
        return [c.name for c in averaged_checkpoints(job)]

    assert averaged(average_share=0.15) == ["step_00000300", "step_00000400", "step_00000500"]
    assert averaged(average_share=0.01) == ["step_00000500"]
    assert averaged(average_last=2) == ["step_00000400", "step_00000500"]


def test_training_s_budget_leaves_the_reserve_to_the_rest_of_the_job(tmp_path):
    def recipe(**pipeline):
        values = load_toml(str(REPO / "configs" / "multi30k_en_de_tiny_raw.toml"))
        values["pipeline"] = {**values["pipeline"], **pipeline}
        values["run"] = {**values["run"], "max_minutes": 55}
        return recipe_from_dict(values)

    assert training_minutes(recipe(reserve_minutes=4)) == 51
    with pytest.raises(ValueError, match="reserve_minutes 55 leaves no time to train"):
        recipe(reserve_minutes=55)
