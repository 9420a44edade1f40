"""The pipeline's stages, in order: one table entry each.

A stage is a function of the ``Job`` (the recipe, the work directory and what earlier
stages left there), the artifact it leaves under the work directory, and its done-check:
a stage whose artifact is complete and current is skipped, so running the pipeline again
continues where it stopped. A stage that resumes its own work (fetching file by file,
training from the newest checkpoint) has no done-check of its own and always runs.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from itertools import islice
from pathlib import Path
from typing import TypeVar

import torch

from aiayn.config import PipelineConfig, PrepareConfig, Recipe
from aiayn.data import prepare
from aiayn.data.binarize import resolve_split_file
from aiayn.data.corpus import read_lines
from aiayn.data.multi30k import tok_path
from aiayn.eval import corpus_scores
from aiayn.eval.outputs import OutputCheck
from aiayn.files import sha256_file
from aiayn.pipeline.calibrate_stage import calibrate_confidence, calibrates
from aiayn.pipeline.distill_stage import check_teacher, distill
from aiayn.pipeline.export_stage import check_exports, export, exports
from aiayn.pipeline.prepared import (
    changed_text,
    check_checkpoints_allow,
    manifest_options,
    prepared_manifest,
    recorded_options,
)
from aiayn.pipeline.recipe_corpus import DOMAINS, CorpusFiles, corpus_files, read_split
from aiayn.pipeline.shortlist_stage import build_table, shortlisted, shortlists
from aiayn.store.card import Score, read_scores
from aiayn.store.model_dir import is_model_directory, save_model
from aiayn.store.model_dir import load_model as load_model_dir
from aiayn.text.preprocessing import MOSES_LOWERCASED, TextProcessor
from aiayn.train import Trainer, TrainerState, list_checkpoints
from aiayn.train.checkpoint import (
    CHECKSUMS_FILE,
    average_checkpoints,
    averaged_card,
    checkpoint_progress,
    model_assets,
)
from aiayn.train.metrics import Reporter
from aiayn.translate.translator import SearchOptions
from aiayn.validation import card_for, validators_for
from aiayn.workers.translator_process import DecoderSpec, TranslatorProcess


@dataclass
class TestResult:
    split: str
    bleu: float
    chrf: float
    bleu_signature: str
    chrf_signature: str
    sentences: int
    seconds: float
    examples: list[dict[str, str]] = field(default_factory=list)
    literature_bleu: float | None = None  # "literature score"
    literature_signature: str = ""
    outputs: OutputCheck | None = None  # the empty and degenerate translations


@dataclass
class Job:
    """What the stages share: the recipe and where it runs (fixed), then what each stage
    leaves for the later ones (filled in as they run)."""

    recipe: Recipe
    work: Path
    corpus_from: str | Path | None
    recipe_dir: Path
    reporter: Reporter
    resources: contextlib.ExitStack  # closed when the pipeline ends (the decoding process)
    release_memory: Callable[[], None]  # the allocator's policy (``Trainer``)
    command: str = ""  # the command that ran the pipeline, for the model card
    corpus: CorpusFiles | None = None  # "corpus"
    trained: TrainerState | None = None  # "train"
    translator: TranslatorProcess | None = None  # "load model"
    alpha: float = 0.0  # "tune length penalty" (else the recipe's)
    alpha_scores: dict[float, float] = field(default_factory=dict)
    tests: list[TestResult] = field(default_factory=list)  # "translate and score"

    @property
    def p(self) -> PipelineConfig:
        return self.recipe.pipeline

    def log(self, message: str) -> None:
        self.reporter.log(message)

    @property
    def data_dir(self) -> Path:
        return self.work / "data"

    @property
    def run_dir(self) -> Path:
        return self.work / "run"

    @property
    def model_dir(self) -> Path:
        return self.work / "model"


T = TypeVar("T")


def need(value: T | None, name: str) -> T:
    """``value``, the Job field ``name`` that an earlier stage set, typed as the field is.

    Raises:
        RuntimeError: no stage before this one set it (the table's order is wrong).
    """
    if value is None:
        raise RuntimeError(f"the pipeline has no {name} yet: a stage runs too early")
    return value


def _never(job: Job) -> bool:
    return False


def _always(job: Job) -> bool:
    return True


@dataclass(frozen=True)
class Stage:
    """One step of the pipeline.

    Attributes:
        name: as logged (``== name``) and timed (``PipelineResult.stage_seconds``).
        artifact: what it leaves, relative to the work directory ("" for nothing on disk).
        run: does the work, and sets the ``Job`` fields later stages read.
        done: True when the artifact is complete and current: ``run`` is skipped.
        when: False when the recipe does not ask for this stage.
    """

    name: str
    artifact: str
    run: Callable[[Job], None]
    done: Callable[[Job], bool] = _never
    when: Callable[[Job], bool] = _always


def fetch_corpus(job: Job) -> None:
    """Fetches a named corpus file by file (a file already there is kept)."""
    job.corpus = corpus_files(
        job.p, job.work, corpus_from=job.corpus_from, recipe_dir=job.recipe_dir, log=job.log
    )


DISTILLED = "distilled"  # under the work directory


def distill_corpus(job: Job) -> None:
    """Replaces the training split's target side by the teacher's translations of its source
    side (``aiayn.pipeline.distill_stage``: shards an earlier run finished are reused; another
    teacher or other settings start again)."""
    p, corpus = job.p, need(job.corpus, "corpus")
    teacher = check_teacher(p.distill.teacher, (p.src_lang, p.tgt_lang))
    source = resolve_split_file(corpus.train, p.src_lang)
    done = distill(teacher, source, job.work / DISTILLED, p.distill, restart=True, log=job.log)
    job.corpus = dataclasses.replace(corpus, train=str(done.prefix))


def prepare_config(job: Job) -> PrepareConfig:
    corpus = need(job.corpus, "corpus")
    return PrepareConfig(
        src_lang=job.p.src_lang,
        tgt_lang=job.p.tgt_lang,
        train=corpus.train,
        valid=corpus.valid,
        pretokenized=corpus.pretokenized,
        # a model to start from encodes the corpus with its own tokenizers
        **({"vocab_from": job.recipe.train.run.init_from} | job.recipe.prepare),
    )


def prepared(job: Job) -> bool:
    """The dataset was prepared with the recipe's options, from the same text."""
    cfg = prepare_config(job)
    manifest = prepared_manifest(job.data_dir)
    same_options = recorded_options(manifest) == manifest_options(cfg)
    return same_options and changed_text(manifest, cfg) is None


def prepare_data(job: Job) -> None:
    cfg = prepare_config(job)
    manifest = prepared_manifest(job.data_dir)
    changed = changed_text(manifest, cfg)
    check_checkpoints_allow(recorded_options(manifest), manifest_options(cfg), changed, job.run_dir)
    if changed is not None:
        job.log(f"{changed} changed since {job.data_dir} was prepared: preparing it again")
    workers = min(4, os.cpu_count() or 1)
    prepare(cfg, job.data_dir, overwrite=True, workers=workers, log=job.log)


def train(job: Job) -> None:
    """Trains, or resumes from the newest checkpoint (a finished run returns at once); the
    trainer, its model and its data are let go on return."""
    recipe, run = job.recipe, job.recipe.train.run
    cfg = dataclasses.replace(
        recipe.train,
        data=dataclasses.replace(recipe.train.data, dir=str(job.data_dir)),
        run=dataclasses.replace(
            run,
            dir=str(job.run_dir),
            valid_tokenize=run.valid_tokenize or job.p.tokenize,
            max_minutes=training_minutes(recipe),
        ),
    )
    trainer = Trainer(
        cfg,
        resume=True,
        reporter=job.reporter,
        validators=validators_for(cfg),
        release_memory=job.release_memory,
        card=card_for(cfg, job.command),
    )
    job.trained = trainer.train()
    del trainer
    job.release_memory()  # the trainer's heap: this process only waits from now on


def training_minutes(recipe: Recipe) -> float:
    """Training's time budget: the recipe's ``run.max_minutes`` (the whole job's) less
    ``pipeline.reserve_minutes``; 0 (no limit) where the recipe sets none."""
    whole = recipe.train.run.max_minutes
    return whole - recipe.pipeline.reserve_minutes if whole else 0.0


AVERAGED = "averaged.json"  # which checkpoints (and their checksums) the model averages


def averaged_checkpoints(job: Job) -> list[Path]:
    """The checkpoints the final model averages (§6.1): the last ``average_last``, or with
    ``average_share`` those saved in that last share of the run's budget (the last one at
    least), in order."""
    checkpoints = list_checkpoints(job.run_dir)
    if not job.p.average_share:
        return checkpoints[-job.p.average_last :]
    start = 1.0 - job.p.average_share
    inside = [c for c in checkpoints if checkpoint_progress(c) >= start]
    return inside or checkpoints[-1:]


def _averaged_stamp(job: Job) -> dict[str, str]:
    return {c.name: sha256_file(c / CHECKSUMS_FILE) for c in averaged_checkpoints(job)}


def averaged(job: Job) -> bool:
    """The model directory holds the average of the run's current last checkpoints."""
    stamp = job.work / AVERAGED
    return (
        is_model_directory(job.model_dir)
        and stamp.is_file()
        and json.loads(stamp.read_text()) == _averaged_stamp(job)
    )


def average(job: Job) -> None:
    checkpoints = averaged_checkpoints(job)
    model, cfg = average_checkpoints(checkpoints)
    card = averaged_card(checkpoints, job.command)
    save_model(model, cfg, job.model_dir, assets=model_assets(checkpoints[-1]), card=card)
    stamp = job.work / AVERAGED
    stamp.with_suffix(".tmp").write_text(json.dumps(_averaged_stamp(job), indent=2))
    stamp.with_suffix(".tmp").replace(stamp)
    job.log(
        f"averaged {len(checkpoints)} checkpoints "
        f"({checkpoints[0].name} .. {checkpoints[-1].name}) -> {job.model_dir}"
    )


def load_model(job: Job) -> None:
    """Starts the decoding process: the model in a process of its own, not in the trained
    heap (``decode.process``)."""
    spec = DecoderSpec(str(job.model_dir), threads=torch.get_num_threads())
    job.translator = job.resources.enter_context(TranslatorProcess(spec))


def search_options(p: PipelineConfig, alpha: float) -> SearchOptions:
    """The recipe's decoding (``PipelineConfig.decode``) with the length penalty ``alpha``."""
    return dataclasses.replace(p.decode, alpha=alpha)


def tune_alpha(job: Job) -> None:
    """The length-penalty exponent with the best validation BLEU among ``tune_alpha`` (the
    first one on ties), and every exponent's score."""
    p, corpus, translator = job.p, need(job.corpus, "corpus"), need(job.translator, "translator")
    sources, references = read_split(corpus.valid, p)
    scores = {}
    for alpha in p.tune_alpha:
        options = search_options(p, alpha)
        hyps = [h[0].text for h in translator.translate(sources, options, warn=job.log)]
        scores[alpha] = _scores(hyps, references, corpus, p).bleu
        job.log(f"valid: α {alpha}: BLEU {scores[alpha]:.2f}")
    job.alpha = max(p.tune_alpha, key=lambda a: scores[a])
    job.alpha_scores = scores
    job.log(f"length penalty: α {job.alpha} (best validation BLEU)")


def translate_and_score(job: Job) -> None:
    """Translates each test split into ``results/SPLIT.LANG.hyp`` and scores it."""
    corpus = need(job.corpus, "corpus")
    job.tests = [translate_split(job, split, prefix) for split, prefix in corpus.tests.items()]


def translate_split(job: Job, split: str, prefix: str) -> TestResult:
    p, corpus, translator = job.p, need(job.corpus, "corpus"), need(job.translator, "translator")
    sources, references = read_split(prefix, p)
    begin = time.perf_counter()
    options = search_options(p, job.alpha)
    hyps = [h[0].text for h in translator.translate(sources, options, warn=job.log)]
    seconds = time.perf_counter() - begin
    results = job.work / "results"
    results.mkdir(exist_ok=True)
    (results / f"{split}.{p.tgt_lang}.hyp").write_text("\n".join(hyps) + "\n", encoding="utf-8")
    scores = _scores(hyps, references, corpus, p)
    job.log(
        f"{split}: BLEU {scores.bleu:.2f}, chrF {scores.chrf:.2f} "
        f"({len(sources) / seconds:.1f} sentences/s)"
    )
    if scores.outputs and scores.outputs.warning:
        job.log(f"{split}: {scores.outputs.warning}")
    examples = [
        {"source": sources[i], "reference": references[i], "translation": hyps[i]}
        for i in range(min(p.examples, len(sources)))
    ]
    return TestResult(
        split,
        scores.bleu,
        scores.chrf,
        scores.bleu_signature,
        scores.chrf_signature,
        len(sources),
        seconds,
        examples,
        outputs=scores.outputs,
    )


def write_card(job: Job) -> None:
    """Writes the model directory again with its test scores on its card (whole, as every
    model directory is written); a student's card names its teacher, with the test BLEU the
    teacher's own card gives."""
    checkpoints = averaged_checkpoints(job)
    teacher = job.p.distill.teacher
    scores = [
        Score(t.split, name, value, signature, f"beam {job.p.decode.beam}, α {job.alpha}")
        for t in job.tests
        for name, value, signature in (
            ("BLEU", t.bleu, t.bleu_signature),
            ("chrF", t.chrf, t.chrf_signature),
        )
    ]
    card = dataclasses.replace(
        averaged_card(checkpoints, job.command),
        domain=DOMAINS.get(job.p.dataset, ""),
        scores=tuple(scores),
        limits=_bad_outputs(job),
        teacher=teacher,
        teacher_scores=read_scores(teacher) if teacher else (),
    )
    model, cfg = load_model_dir(job.model_dir)
    save_model(model, cfg, job.model_dir, assets=model_assets(job.model_dir), card=card)


def _bad_outputs(job: Job) -> tuple[str, ...]:
    """A line for the card's known limits for each test set translated mostly empty or
    degenerate."""
    return tuple(
        f"Its translations of the {t.split} test set were mostly unusable "
        f"({t.outputs.warning.removeprefix('warning: ')}): it is not ready for use."
        for t in job.tests
        if t.outputs and t.outputs.mostly_bad and t.outputs.warning
    )


def _scores(hyps: list[str], references: list[str], corpus: CorpusFiles, p: PipelineConfig):
    """BLEU (tokenised for the target language, or as the recipe's ``tokenize`` says;
    ``none`` for pre-tokenised text) and chrF."""
    tokenize = "none" if corpus.pretokenized else p.tokenize or None
    return corpus_scores(hyps, references, tgt_lang=p.tgt_lang, tokenize=tokenize)


def literature_score(job: Job) -> None:
    """Scores each test split's hypotheses as the literature scores Multi30k: normalised,
    Moses-tokenised and lowercased as the dataset's ``task1-tokenize.sh`` made its ``tok/``
    files (``aiayn.text.MOSES_LOWERCASED``), against those, with ``tokenize='none'``."""
    p = job.p
    processor = TextProcessor(MOSES_LOWERCASED, p.tgt_lang)
    limit = p.test_limit or None
    for test in job.tests:
        hyps = (job.work / "results" / f"{test.split}.{p.tgt_lang}.hyp").read_text("utf-8")
        tokenized = [processor.prepare(h) for h in hyps.split("\n")[: test.sentences]]
        path = tok_path(job.work / "multi30k", test.split, p.tgt_lang)
        references = list(islice(read_lines(path), limit))
        scores = corpus_scores(tokenized, references, tokenize="none")
        test.literature_bleu, test.literature_signature = scores.bleu, scores.bleu_signature
        job.log(f"{test.split}: BLEU {scores.bleu:.2f} tokenised and lowercased (the literature's)")


STAGES: tuple[Stage, ...] = (
    Stage("check exports", "", check_exports, when=exports),
    Stage("corpus", "multi30k/ or wmt14/ (named corpora)", fetch_corpus),
    Stage("distill", f"{DISTILLED}/", distill_corpus, when=lambda job: bool(job.p.distill.teacher)),
    Stage("prepare", "data/", prepare_data, done=prepared),
    Stage("train", "run/", train),
    Stage("average", "model/", average, done=averaged),
    Stage(
        "shortlist", "model/shortlist.safetensors", build_table, done=shortlisted, when=shortlists
    ),
    Stage("load model", "", load_model),
    Stage("tune length penalty", "", tune_alpha, when=lambda job: bool(job.p.tune_alpha)),
    Stage("calibrate confidence", "model/calibration.json", calibrate_confidence, when=calibrates),
    Stage("translate and score", "results/", translate_and_score),
    Stage("literature score", "", literature_score, when=lambda job: job.p.literature_bleu),
    Stage("model card", "model/README.md", write_card, when=lambda job: bool(job.tests)),
    Stage("export", "exports/", export, when=exports),
)
