"""The whole job in one call: get the corpus, prepare, train, average, translate, score.

The stages are a table (``stages.STAGES``); each reuses what an earlier, interrupted run of
the same work directory finished, so running the command again continues where it stopped.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from aiayn.config import Recipe
from aiayn.config_io import config_to_dict
from aiayn.pipeline.recipe_corpus import CorpusFiles, corpus_files, data_dir, default_corpus_dir
from aiayn.pipeline.stages import STAGES, Job, Stage, TestResult, need
from aiayn.train.metrics import LoggingReporter, Reporter

__all__ = [
    "STAGES",
    "CorpusFiles",
    "Job",
    "PipelineResult",
    "Stage",
    "TestResult",
    "corpus_files",
    "data_dir",
    "default_corpus_dir",
    "run_pipeline",
]

RESULTS = "results.json"
MEASURED_SECONDS = 0.5  # less recorded training time than this is no speed to report


@dataclass
class PipelineResult:
    work_dir: str
    updates: int
    train_tokens: int
    train_seconds: float
    total_seconds: float
    stage_seconds: dict[str, float]
    tests: list[TestResult]
    alpha: float  # the length-penalty exponent used on the test sets
    alpha_scores: dict[float, float]  # validation BLEU of each exponent tried, if tuned

    @property
    def tokens_per_second(self) -> float | None:
        """Training speed; None when the run recorded no training time to divide by."""
        if self.train_seconds < MEASURED_SECONDS:
            return None
        return self.train_tokens / self.train_seconds


def run_pipeline(
    recipe: Recipe,
    work_dir: str | Path,
    *,
    corpus_from: str | Path | None = None,
    recipe_dir: str | Path = ".",
    reporter: Reporter | None = None,
    stages: tuple[Stage, ...] = STAGES,
    release_memory: Callable[[], None] = lambda: None,
    command: str = "",
) -> PipelineResult:
    """Run every stage of ``recipe`` in ``work_dir`` (skipping those already done) and write
    ``results.json`` there.

    The test sets are decoded in a spawned process (``aiayn.workers.translator_process``): a
    script that calls this runs it under ``if __name__ == "__main__":``, as ``multiprocessing``
    asks.

    Args:
        corpus_from: a local copy of a named corpus (Multi30k, WMT14) instead of a download.
        recipe_dir: what relative file prefixes of ``dataset = "files"`` are relative to.
        stages: the stages to run, in order.
        release_memory: the allocator's policy, as ``Trainer`` takes it.
        command: the command that ran it, for the model card.
    """
    start = time.perf_counter()
    work = Path(work_dir)
    work.mkdir(parents=True, exist_ok=True)
    seconds: dict[str, float] = {}
    with contextlib.ExitStack() as resources:
        job = Job(
            recipe=recipe,
            work=work,
            corpus_from=corpus_from,
            recipe_dir=Path(recipe_dir),
            reporter=reporter or LoggingReporter(),
            resources=resources,
            release_memory=release_memory,
            alpha=recipe.pipeline.decode.alpha,
            command=command,
        )
        for stage in stages:
            if stage.when(job):
                seconds[stage.name] = _run_stage(stage, job)
    trained = need(job.trained, "trained")
    result = PipelineResult(
        work_dir=str(work),
        updates=trained.update,
        train_tokens=trained.tokens,
        train_seconds=trained.train_seconds,
        total_seconds=time.perf_counter() - start,
        stage_seconds=seconds,
        tests=job.tests,
        alpha=job.alpha,
        alpha_scores=job.alpha_scores,
    )
    budget = recipe.train.run.max_minutes
    if budget and result.total_seconds > 60.0 * budget:
        job.log(
            f"warning: the job took {result.total_seconds / 60:.1f} minutes, over run.max_minutes "
            f"{budget:g}: raise pipeline.reserve_minutes for what follows training"
        )
    payload = dataclasses.asdict(result) | {"recipe": _recipe_dict(recipe)}
    (work / RESULTS).write_text(json.dumps(payload, indent=2, ensure_ascii=False))
    return result


def _run_stage(stage: Stage, job: Job) -> float:
    """Run ``stage`` unless it is done; its seconds."""
    begin = time.perf_counter()
    job.log(f"== {stage.name}")
    if stage.done(job):
        job.log(f"reusing {job.work / stage.artifact}")
    else:
        stage.run(job)
    return time.perf_counter() - begin


def _recipe_dict(recipe: Recipe) -> dict:
    return {
        "pipeline": config_to_dict(recipe.pipeline),
        "prepare": recipe.prepare,
        **config_to_dict(recipe.train),
    }
