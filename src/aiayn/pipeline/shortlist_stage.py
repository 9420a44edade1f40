"""The pipeline's "shortlist" stage: the model's vocabulary shortlist table
(``aiayn.accel.shortlist``: IBM Model 1 over its subword pieces, as ``aiayn shortlist``
builds it) from the recipe's training corpus (the teacher's translations, for a student),
written into ``model/shortlist.safetensors`` so that the model ships with it and
``shortlist = K`` decodes the test sets with it.

The corpus is read as the subword model read it in training (``raw``): a pre-tokenised
corpus is already in its model's form. A table in the model directory is of its model
(averaging writes the directory anew, without one; the model card's rewrite carries it
over), and ``shortlist.json`` in the work directory records the sizes it was built with:
a table of the recipe's sizes is kept.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Protocol

from aiayn.data.binarize import resolve_split_file
from aiayn.files import write_file
from aiayn.pipeline.recipe_corpus import CorpusFiles
from aiayn.pipeline.stage_job import StageJob
from aiayn.translate.shortlist_table import FREQUENT, LINES, SHORTLIST_FILE, build_shortlist

STAMP = "shortlist.json"  # under the work directory


class ShortlistJob(StageJob, Protocol):
    """What the stage reads of the pipeline's ``Job``."""

    corpus: CorpusFiles | None
    work: Path


def shortlists(job: ShortlistJob) -> bool:
    """The recipe asks for a table (``shortlist_table``)."""
    return job.p.shortlist_table > 0


def _stamp(job: ShortlistJob) -> dict[str, int]:
    return {"best": job.p.shortlist_table, "frequent": FREQUENT, "lines": LINES}


def shortlisted(job: ShortlistJob) -> bool:
    """The model directory holds a table, built with the recipe's sizes."""
    try:
        stamp = json.loads((job.work / STAMP).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    return (job.model_dir / SHORTLIST_FILE).is_file() and stamp == _stamp(job)


def build_table(job: ShortlistJob) -> None:
    """Builds the table of the model in ``model/`` from the training corpus."""
    if job.corpus is None:
        raise RuntimeError("the pipeline has no corpus yet: a stage runs too early")
    p, train = job.p, job.corpus.train
    source, target = (resolve_split_file(train, lang) for lang in (p.src_lang, p.tgt_lang))
    path = build_shortlist(
        job.model_dir,
        source,
        target,
        best=p.shortlist_table,
        frequent=FREQUENT,
        lines=LINES,
        raw=True,
    )
    write_file(job.work / STAMP, json.dumps(_stamp(job), indent=2) + "\n")
    job.log(
        f"shortlist table ({p.shortlist_table} target pieces per source piece, from "
        f"{source} and {target}): {path}"
    )
