"""Validation metrics beyond the loss, wired into training: BLEU and chrF of the model's own
translations of the validation split (greedy or beam), BLEU tokenised for the target
language (``aiayn.eval``)."""

from __future__ import annotations

import os
from pathlib import Path

from aiayn.config import TrainConfig
from aiayn.data import load_prepared
from aiayn.data.tokenizer_files import length_ratio_of
from aiayn.eval import bleu_signature, chrf_signature, corpus_scores, make_bleu
from aiayn.store.card import ModelCard
from aiayn.train import Validator
from aiayn.train.metrics import Metric
from aiayn.train.run_dir import SIGNATURES_FILE  # in the run directory
from aiayn.translate.translator import SearchOptions, Translator


def validators_for(cfg: TrainConfig) -> list[Validator]:
    """The extra validation metrics ``cfg`` asks for (``run.valid_bleu``)."""
    return [bleu_validator(cfg)] if cfg.run.valid_bleu else []


def card_for(cfg: TrainConfig, command: str = "") -> ModelCard:
    """What a trainer cannot know of the models it saves: the command and BLEU's signature."""
    signatures = {}
    if cfg.run.valid_bleu and cfg.task == "translation":
        tgt_lang, tokenize = _bleu_arguments(cfg, load_prepared(cfg.data.dir).manifest)
        signatures[Metric.BLEU.value] = bleu_signature(tgt_lang, tokenize)
        signatures[Metric.CHRF.value] = chrf_signature()
    return ModelCard(command=command, signatures=signatures)


def _bleu_arguments(cfg: TrainConfig, manifest: dict) -> tuple[str, str | None]:
    """The target language and the sacreBLEU tokenizer validation BLEU is computed with."""
    tokenize = "none" if manifest["pretokenized"] else cfg.run.valid_tokenize or None
    return str(manifest.get("tgt_lang", "")), tokenize


def bleu_validator(cfg: TrainConfig) -> Validator:
    """BLEU and chrF on the validation split, decoded from its ids with ``run.valid_beam``;
    the first validation writes both sacreBLEU signatures to ``RUN/valid_signatures.txt``.

    Raises:
        ScoringError: BLEU's tokenizer is not installed (before any training).
    """
    data = load_prepared(cfg.data.dir)
    valid = data.split(cfg.data.valid_split)
    sources = [valid.src[i].tolist() for i in range(len(valid))]
    references = [data.tgt_tokenizer.decode(valid.tgt[i].tolist()) for i in range(len(valid))]
    tgt_lang, tokenize = _bleu_arguments(cfg, data.manifest)
    make_bleu(tgt_lang, tokenize)  # a missing tokenizer fails now, not after the first updates
    options = SearchOptions(beam=cfg.run.valid_beam, batch_tokens=cfg.data.valid_max_tokens)
    ratio = length_ratio_of(data.manifest)
    signatures = Path(cfg.run.dir) / SIGNATURES_FILE

    def validate(model) -> dict[Metric, float]:
        # the weights change between validations: no packed copy (its kernels would stay)
        translator = Translator(
            model, data.src_tokenizer, data.tgt_tokenizer, packed=False, length_ratio=ratio
        )
        hyps = [t[0].text for t in translator.translate_ids(sources, options)]
        scores = corpus_scores(hyps, references, tgt_lang=tgt_lang, tokenize=tokenize)
        if not signatures.is_file():
            _write_text(signatures, f"BLEU {scores.bleu_signature}\nchrF {scores.chrf_signature}\n")
        return {
            Metric.BLEU: scores.bleu,
            Metric.CHRF: scores.chrf,
            Metric.BLEU_BEAM: float(options.beam),
        }

    return validate


def _write_text(path: Path, text: str) -> None:
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, path)
