"""The pipeline's literature score: a raw cased model's hypotheses scored as the
literature scores Multi30k (normalised, Moses-tokenised, lowercased, against tok/)."""

import contextlib
import gzip
import shutil
from itertools import islice

import pytest

from aiayn.cli.pipeline import format_results
from aiayn.config_io import recipe_from_dict
from aiayn.pipeline import STAGES, Job, PipelineResult, stages
from aiayn.pipeline.stages import literature_score

from .train.conftest import Messages

SPLIT, N = "test_2016_flickr", 60


def _job(tmp_path, multi30k_dir, hyps):
    (tmp_path / "multi30k" / "tok").mkdir(parents=True)
    name = f"tok/{SPLIT}.lc.norm.tok.de.gz"
    shutil.copyfile(multi30k_dir / name, tmp_path / "multi30k" / name)
    (tmp_path / "results").mkdir()
    (tmp_path / "results" / f"{SPLIT}.de.hyp").write_text("\n".join(hyps) + "\n")
    recipe = recipe_from_dict(
        {"pipeline": {"text": "raw", "literature_bleu": True, "test_limit": N}}
    )
    job = _bare_job(recipe, tmp_path)
    job.tests = [stages.TestResult(SPLIT, 0.0, 0.0, "", "", len(hyps), 1.0)]
    return job


def _bare_job(recipe, work):
    return Job(
        recipe=recipe,
        work=work,
        corpus_from=None,
        recipe_dir=work,
        reporter=Messages(),
        resources=contextlib.ExitStack(),
        release_memory=lambda: None,
    )


def _raw(multi30k_dir):
    with gzip.open(multi30k_dir / f"{SPLIT}.de.gz", "rt", encoding="utf-8") as f:
        return [line.rstrip("\n") for line in islice(f, N)]


def test_the_raw_references_score_100_and_other_text_less(tmp_path, multi30k_dir):
    job = _job(tmp_path / "a", multi30k_dir, _raw(multi30k_dir))
    literature_score(job)
    [test] = job.tests
    assert test.literature_bleu == pytest.approx(100.0)
    assert "tok:none" in test.literature_signature and "case:mixed" in test.literature_signature
    shifted = _raw(multi30k_dir)[1:] + _raw(multi30k_dir)[:1]
    other = _job(tmp_path / "b", multi30k_dir, shifted)
    literature_score(other)
    assert other.tests[0].literature_bleu < 20


def test_the_stage_runs_when_the_recipe_asks_and_the_table_shows_it(tmp_path, multi30k_dir):
    job = _job(tmp_path, multi30k_dir, _raw(multi30k_dir))
    [stage] = [s for s in STAGES if s.run is literature_score]
    assert stage.when(job)
    plain = recipe_from_dict({"pipeline": {"text": "raw"}})
    assert not stage.when(_bare_job(plain, tmp_path))
    literature_score(job)
    result = PipelineResult(str(tmp_path), 1, 1, 1.0, 1.0, {}, job.tests, 0.6, {})
    table = format_results(result, job.recipe)
    assert "| BLEU (tokenised, lowercased) |" in table and "| 100.00 |" in table


@pytest.mark.parametrize("pipeline", [{"text": "tok"}, {"dataset": "wmt14", "text": "raw"}])
def test_the_literature_score_needs_multi30k_raw_text(pipeline):
    with pytest.raises(
        ValueError, match='literature_bleu needs dataset "multi30k" with text "raw"'
    ):
        recipe_from_dict({"pipeline": {**pipeline, "literature_bleu": True}})
