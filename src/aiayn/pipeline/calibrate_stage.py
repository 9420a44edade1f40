"""The pipeline's "calibrate confidence" stage: the confidence fitted to the validation
split's sentence chrF (``aiayn.eval.calibration_fit``), decoded as the test sets are, into
``model/calibration.json``; a confidence that does not rank its validation translations,
or too few lines, is logged and left as the model's own."""

from __future__ import annotations

import dataclasses
from typing import Protocol

from aiayn.eval.calibration_fit import CalibrationError, calibrate
from aiayn.pipeline.recipe_corpus import CorpusFiles, read_split
from aiayn.pipeline.stage_job import StageJob
from aiayn.translate.calibration import CALIBRATION_FILE, write_calibration
from aiayn.workers.translator_process import TranslatorProcess


class CalibrationJob(StageJob, Protocol):
    """What the stage reads of the pipeline's ``Job``."""

    corpus: CorpusFiles | None
    translator: TranslatorProcess | None
    alpha: float


def calibrates(job: CalibrationJob) -> bool:
    """The recipe asks for it and the model directory has no calibration yet (averaging
    writes a new one: a calibration there is of this model)."""
    return job.p.calibrate and not (job.model_dir / CALIBRATION_FILE).is_file()


def calibrate_confidence(job: CalibrationJob) -> None:
    if job.corpus is None or job.translator is None:
        raise RuntimeError("the pipeline has no corpus or translator yet: a stage runs too early")
    sources, references = read_split(job.corpus.valid, job.p)
    options = dataclasses.replace(job.p.decode, alpha=job.alpha)
    try:
        fit = calibrate(job.translator.translate, sources, references, options)
    except CalibrationError as e:
        job.log(f"confidence not calibrated: {e}")
        return
    path = write_calibration(job.model_dir, fit.calibration)
    job.log(
        f"confidence calibrated on {len(sources)} validation lines (Spearman with sentence "
        f"chrF {fit.spearman:.3f}; mean gap to it {fit.gap_raw:.3f} -> "
        f"{fit.gap_calibrated:.3f}): {path}"
    )
