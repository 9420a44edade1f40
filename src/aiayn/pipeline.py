"""The whole job in one call: get the corpus, prepare, train, average, translate, score.

Each stage reuses what an earlier, interrupted run of the same work directory finished, so
running the command again continues where it stopped.
"""

from __future__ import annotations

import dataclasses
import json
import os
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from itertools import islice
from pathlib import Path

import torch

from aiayn.config import PipelineConfig, PrepareConfig, Recipe
from aiayn.config_io import config_to_dict
from aiayn.data import prepare
from aiayn.data.binarize import resolve_split_file, split_name
from aiayn.data.corpus import MANIFEST, CorpusError, read_lines
from aiayn.data.multi30k import fetch_multi30k, raw_path, tok_path
from aiayn.data.wmt14 import fetch_wmt14
from aiayn.decode.process import DecoderSpec, TranslatorProcess
from aiayn.decode.translator import SearchOptions
from aiayn.eval import corpus_scores
from aiayn.files import sha256_file
from aiayn.memory import release_free_memory
from aiayn.store.model_dir import save_model
from aiayn.train import Trainer, TrainerState, list_checkpoints
from aiayn.train.checkpoint import average_checkpoints, model_assets
from aiayn.train.metrics import Reporter, SilentReporter
from aiayn.train.run_dir import RunDirectoryError
from aiayn.validation import validators_for


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
    def tokens_per_second(self) -> float:
        return self.train_tokens / max(self.train_seconds, 1e-9)


def run_pipeline(
    recipe: Recipe,
    work_dir: str | Path,
    *,
    corpus_from: str | Path | None = None,
    recipe_dir: str | Path = ".",
    reporter: Reporter | None = None,
) -> PipelineResult:
    """Run every stage of ``recipe`` in ``work_dir``; see the module docstring.

    The test sets are decoded in a spawned process (``aiayn.decode.process``): a script that
    calls this runs it under ``if __name__ == "__main__":``, as ``multiprocessing`` asks.

    Args:
        corpus_from: a local copy of a named corpus (Multi30k, WMT14) instead of a download.
        recipe_dir: what relative file prefixes of ``dataset = "files"`` are relative to.
    """
    reporter = reporter or SilentReporter()
    log = reporter.log
    start = time.perf_counter()
    work = Path(work_dir)
    work.mkdir(parents=True, exist_ok=True)
    p = recipe.pipeline
    stages: dict[str, float] = {}

    def stage(name: str):
        log(f"== {name}")
        stages[name] = time.perf_counter()

    def done(name: str):
        stages[name] = time.perf_counter() - stages[name]

    stage("corpus")
    corpus = corpus_files(p, work, corpus_from=corpus_from, recipe_dir=Path(recipe_dir), log=log)
    done("corpus")

    stage("prepare")
    prep = _prepare_config(recipe, corpus)
    data_dir = work / "data"
    manifest, wanted = _prepared_manifest(data_dir), _options(prep)
    changed = _changed_text(manifest, prep)
    if manifest.get("options") == wanted and changed is None:
        log(f"reusing {data_dir}")
    else:
        _check_checkpoints_allow(manifest.get("options"), wanted, changed, work / "run")
        if changed is not None:
            log(f"{changed} changed since {data_dir} was prepared: preparing it again")
        prepare(prep, data_dir, overwrite=True, workers=min(4, os.cpu_count() or 1), log=log)
    done("prepare")

    stage("train")
    state = _train(recipe, data_dir, work / "run", reporter)
    release_free_memory()  # the trainer's heap: this process only waits from now on
    done("train")

    stage("average")
    checkpoints = list_checkpoints(work / "run")[-p.average_last :]
    model, cfg = average_checkpoints(checkpoints)
    model_dir = work / "model"
    save_model(model, cfg, model_dir, assets=model_assets(checkpoints[-1]))
    log(
        f"averaged {len(checkpoints)} checkpoints "
        f"({checkpoints[0].name} .. {checkpoints[-1].name}) -> {model_dir}"
    )
    done("average")

    stage("load model")  # in a process of its own: not in the trained heap (decode.process)
    decoder = DecoderSpec(str(model_dir), threads=torch.get_num_threads())
    with TranslatorProcess(decoder) as translator:
        done("load model")
        alpha, alpha_scores = p.alpha, {}
        if p.tune_alpha:
            stage("tune length penalty")
            alpha, alpha_scores = _tune_alpha(translator, corpus, p, log)
            done("tune length penalty")

        stage("translate and score")
        options = _search_options(p, alpha)
        tests = [
            _translate_split(translator, corpus, split, p, options, work, log)
            for split in corpus.tests
        ]
        done("translate and score")

    result = PipelineResult(
        work_dir=str(work),
        updates=state.update,
        train_tokens=state.tokens,
        train_seconds=state.train_seconds,
        total_seconds=time.perf_counter() - start,
        stage_seconds=stages,
        tests=tests,
        alpha=alpha,
        alpha_scores=alpha_scores,
    )
    payload = dataclasses.asdict(result) | {"recipe": _recipe_dict(recipe)}
    (work / "results.json").write_text(json.dumps(payload, indent=2, ensure_ascii=False))
    return result


def _train(recipe: Recipe, data_dir: Path, run_dir: Path, reporter: Reporter) -> TrainerState:
    """Train (or resume) the recipe's model; the trainer, its model and its data are let go
    on return."""
    run = recipe.train.run
    cfg = dataclasses.replace(
        recipe.train,
        data=dataclasses.replace(recipe.train.data, dir=str(data_dir)),
        run=dataclasses.replace(
            run, dir=str(run_dir), valid_tokenize=run.valid_tokenize or recipe.pipeline.tokenize
        ),
    )
    return Trainer(cfg, resume=True, reporter=reporter, validators=validators_for(cfg)).train()


@dataclass(frozen=True)
class CorpusFiles:
    """Where a recipe's text is: file prefixes (``PREFIX.LANG``, plain or .gz) by split."""

    train: str
    valid: str
    tests: dict[str, str]  # test split name -> prefix
    pretokenized: bool  # tokenised text: BLEU on its tokens (tokenize "none")


def corpus_files(
    p: PipelineConfig,
    work: Path,
    *,
    corpus_from: str | Path | None,
    recipe_dir: Path,
    log: Callable[[str], None],
) -> CorpusFiles:
    """The recipe's corpus: Multi30k or WMT14 fetched into ``work`` (or copied from
    ``corpus_from``), or the user's own files."""
    if p.dataset == "files":

        def resolve(prefix: str) -> str:
            return str(recipe_dir / prefix) if not Path(prefix).is_absolute() else prefix

        tests = {split_name(t): resolve(t) for t in p.test}
        return CorpusFiles(resolve(p.train), resolve(p.valid), tests, p.pretokenized)
    if p.dataset == "wmt14":
        root = fetch_wmt14(work / "wmt14", source=corpus_from, log=log)
        tests = {"newstest2014": str(root / "newstest2014")}
        return CorpusFiles(str(root / "train"), str(root / "newstest2013"), tests, False)
    root = fetch_multi30k(work / "multi30k", source=corpus_from, log=log)
    path_of = tok_path if p.text == "tok" else raw_path

    def prefix(split: str) -> str:  # .../train.lc.norm.tok.en.gz -> .../train.lc.norm.tok
        return str(path_of(root, split, p.src_lang))[: -len(f".{p.src_lang}.gz")]

    tests = {split: prefix(split) for split in p.test_splits}
    return CorpusFiles(prefix("train"), prefix("val"), tests, p.text == "tok")


def _prepare_config(recipe: Recipe, corpus: CorpusFiles) -> PrepareConfig:
    p = recipe.pipeline
    return PrepareConfig(
        src_lang=p.src_lang,
        tgt_lang=p.tgt_lang,
        train=corpus.train,
        valid=corpus.valid,
        pretokenized=corpus.pretokenized,
        **recipe.prepare,
    )


def _prepared_manifest(data_dir: Path) -> dict:
    """The manifest of the dataset in ``data_dir``; empty when it holds none."""
    manifest = data_dir / MANIFEST
    return json.loads(manifest.read_text()) if manifest.is_file() else {}


def _changed_text(manifest: dict, cfg: PrepareConfig) -> str | None:
    """The first training or validation file whose text differs from the one the dataset
    was prepared from (by the digest its manifest records); None when none does, or when
    the dataset records no digests."""
    splits = manifest.get("splits", {})
    for name, prefix in (("train", cfg.train), ("valid", cfg.valid)):
        recorded = splits.get(name, {}).get("text_sha256", {})
        for role, lang in (("src", cfg.src_lang), ("tgt", cfg.tgt_lang)):
            path = resolve_split_file(prefix, lang)
            if role in recorded and sha256_file(path) != recorded[role]:
                return str(path)
    return None


def _options(cfg: PrepareConfig) -> dict:
    """``cfg`` as a manifest records it (JSON values: lists, not tuples)."""
    return json.loads(json.dumps(config_to_dict(cfg)))


PATH_OPTIONS = {"train", "valid", "test"}  # where the text is, not how it is prepared


def _check_checkpoints_allow(
    before: dict | None, now: dict, changed_text: str | None, run_dir: Path
) -> None:
    """Refuse to prepare the data again with options ``now`` instead of ``before``, or from
    ``changed_text`` (a file whose text changed), under a run that has checkpoints: the
    trainer would refuse the new data (``check_same_vocabularies``) only after the
    preparation, or resume on text its checkpoints never saw, and the data those
    checkpoints were trained on would be gone. A change of paths alone passes: the same
    text prepared again resumes.

    Raises:
        RunDirectoryError: naming the changed file, or the first option that changed,
            before and now.
    """
    if before is None or not list_checkpoints(run_dir):
        return
    if changed_text is not None:
        raise RunDirectoryError(
            f"{run_dir} has checkpoints trained on {changed_text} as it was, and its text "
            f"has changed since: choose another work directory (--work), or remove "
            f"{run_dir.parent} to start again"
        )
    changed = [k for k in now if k not in PATH_OPTIONS and before.get(k) != now[k]]
    if changed:
        key = changed[0]
        raise RunDirectoryError(
            f"{run_dir} has checkpoints trained on data prepared with {key} = "
            f"{before.get(key)!r}, the recipe now says {now[key]!r}: choose another work "
            f"directory (--work), or remove {run_dir.parent} to start again"
        )


def _read_split(prefix: str, p: PipelineConfig) -> tuple[list[str], list[str]]:
    """Source and reference lines of a split (the first ``p.test_limit`` when set)."""
    limit = p.test_limit or None
    sources = list(islice(read_lines(resolve_split_file(prefix, p.src_lang)), limit))
    references = list(islice(read_lines(resolve_split_file(prefix, p.tgt_lang)), limit))
    if len(sources) != len(references):
        raise CorpusError(
            f"{prefix}: {len(sources)} {p.src_lang} lines but {len(references)} {p.tgt_lang}"
        )
    return sources, references


def _tune_alpha(translator, corpus: CorpusFiles, p, log) -> tuple[float, dict[float, float]]:
    """The length-penalty exponent with the best validation BLEU among ``p.tune_alpha``
    (the first one on ties), and every exponent's score."""
    sources, references = _read_split(corpus.valid, p)
    scores = {}
    for alpha in p.tune_alpha:
        options = _search_options(p, alpha)
        hyps = [h[0].text for h in translator.translate(sources, options, warn=log)]
        scores[alpha] = _scores(hyps, references, corpus, p).bleu
        log(f"valid: α {alpha}: BLEU {scores[alpha]:.2f}")
    best = max(p.tune_alpha, key=lambda a: scores[a])
    log(f"length penalty: α {best} (best validation BLEU)")
    return best, scores


def _search_options(p: PipelineConfig, alpha: float) -> SearchOptions:
    return SearchOptions(
        beam=p.beam, alpha=alpha or None, max_len_b=p.max_len_b, batch_tokens=p.batch_tokens
    )


def _translate_split(translator, corpus: CorpusFiles, split, p, options, work, log) -> TestResult:
    sources, references = _read_split(corpus.tests[split], p)
    begin = time.perf_counter()
    hyps = [h[0].text for h in translator.translate(sources, options, warn=log)]
    seconds = time.perf_counter() - begin
    results = work / "results"
    results.mkdir(exist_ok=True)
    (results / f"{split}.{p.tgt_lang}.hyp").write_text("\n".join(hyps) + "\n", encoding="utf-8")
    scores = _scores(hyps, references, corpus, p)
    log(
        f"{split}: BLEU {scores.bleu:.2f}, chrF {scores.chrf:.2f} "
        f"({len(sources) / seconds:.1f} sentences/s)"
    )
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
    )


def _scores(hyps: list[str], references: list[str], corpus: CorpusFiles, p: PipelineConfig):
    """BLEU (tokenised for the target language, or as the recipe's ``tokenize`` says;
    ``none`` for pre-tokenised text) and chrF."""
    tokenize = "none" if corpus.pretokenized else p.tokenize or None
    return corpus_scores(hyps, references, tgt_lang=p.tgt_lang, tokenize=tokenize)


def _recipe_dict(recipe: Recipe) -> dict:
    return {
        "pipeline": config_to_dict(recipe.pipeline),
        "prepare": recipe.prepare,
        **config_to_dict(recipe.train),
    }


def format_results(result: PipelineResult, recipe: Recipe) -> str:
    """The results table and example translations, as Markdown."""
    p = recipe.pipeline
    pair = f"{p.src_lang}→{p.tgt_lang}"
    lines = [
        f"## {p.dataset} {pair}, beam {p.beam}, α {result.alpha}"
        + (" (chosen on the validation set)" if result.alpha_scores else ""),
        "",
        "| test set | BLEU | chrF | sentences/s |",
        "|---|---:|---:|---:|",
    ]
    for t in result.tests:
        lines.append(
            f"| {t.split} | {t.bleu:.2f} | {t.chrf:.2f} | "
            f"{t.sentences / max(t.seconds, 1e-9):.1f} |"
        )
    lines += [
        "",
        f"- training: {result.updates:,} updates, {result.train_tokens:,} target tokens in "
        f"{result.train_seconds / 60:.1f} min ({result.tokens_per_second:,.0f} tokens/s)",
        f"- whole pipeline: {result.total_seconds / 60:.1f} min wall clock ("
        + ", ".join(f"{k} {v:.0f}s" for k, v in result.stage_seconds.items())
        + ")",
        f"- BLEU signature: {result.tests[0].bleu_signature}" if result.tests else "",
        f"- chrF signature: {result.tests[0].chrf_signature}" if result.tests else "",
        _alpha_line(result),
        "",
        "Examples (test set 1):",
    ]
    for ex in result.tests[0].examples if result.tests else []:
        lines += [
            f"- src: {ex['source']}",
            f"  ref: {ex['reference']}",
            f"  hyp: {ex['translation']}",
        ]
    return "\n".join(lines)


def _alpha_line(result: PipelineResult) -> str:
    if not result.alpha_scores:
        return ""
    tried = ", ".join(f"α {a}: {bleu:.2f}" for a, bleu in result.alpha_scores.items())
    return f"- length penalty chosen on the validation set: {tried} -> α {result.alpha}"


CORPUS_MARKERS = {"multi30k": "train.en.gz", "wmt14": "test-full.tgz"}  # present in a copy


def default_corpus_dir(dataset: str = "multi30k") -> Path | None:
    """``$AIAYN_DATA_DIR/<dataset>`` (default ``../shared/data`` beside the repository) if it
    holds a copy of that corpus; None means download (and nothing for your own files)."""
    base = os.environ.get("AIAYN_DATA_DIR")
    root = Path(base) if base else Path(__file__).resolve().parents[3] / "shared" / "data"
    marker = CORPUS_MARKERS.get(dataset)
    return root / dataset if marker and (root / dataset / marker).is_file() else None
