"""The pipeline's "check exports" and "export" stages: the recipe's exports (CTranslate2,
Hugging Face Marian, an Argos Translate package) refused before any work when the recipe's
model cannot have them, and written under ``exports/`` at the end."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Protocol

from aiayn.config import PipelineConfig, Recipe
from aiayn.interop.argos import export_argos
from aiayn.interop.ct2 import export_ct2
from aiayn.interop.destination import ExportError
from aiayn.interop.hf import check_marian, export_hf
from aiayn.pipeline.stage_job import StageJob


class ExportJob(StageJob, Protocol):
    """What the stages read of the pipeline's ``Job``."""

    recipe: Recipe
    work: Path


EXPORTS = "exports"  # under the work directory


def check_exports(job: ExportJob) -> None:
    """Refuses, before any work, an export the recipe's model cannot have."""
    targets = job.p.exports
    if "hf" in targets:
        check_marian(job.recipe.train.model, where="the recipe (pipeline.exports has hf)")
    if "argos" in targets and not job.recipe.prepare.get("joint_vocab", True):
        raise ExportError(
            "the recipe: pipeline.exports has argos, which needs one SentencePiece model "
            "for both languages (prepare.joint_vocab = false)"
        )


def export(job: ExportJob) -> None:
    """Writes the model in each format the recipe names under ``exports/`` (replacing an
    earlier export)."""
    out = job.work / EXPORTS
    out.mkdir(exist_ok=True)
    for target in job.p.exports:
        path = EXPORTERS[target](job.model_dir, out, job.p)
        job.log(f"exported {target}: {path}")


EXPORTERS: dict[str, Callable[[Path, Path, PipelineConfig], Path]] = {
    "ct2": lambda model, out, p: export_ct2(model, out / "ct2", overwrite=True),
    "hf": lambda model, out, p: export_hf(model, out / "hf", overwrite=True),
    "argos": lambda model, out, p: export_argos(
        model,
        out / f"{p.src_lang}_{p.tgt_lang}.argosmodel",
        from_code=p.src_lang,
        to_code=p.tgt_lang,
        overwrite=True,
    ),
}


def exports(job: ExportJob) -> bool:
    """Whether the recipe names any export (the two stages' ``when``)."""
    return bool(job.p.exports)
