"""Validation metrics beyond the loss, wired into training: BLEU of the model's own
translations of the validation split (greedy or beam)."""

from __future__ import annotations

from aiayn.config import TrainConfig
from aiayn.data import load_prepared
from aiayn.decode.translator import SearchOptions, Translator
from aiayn.eval import corpus_scores
from aiayn.train import Validator
from aiayn.train.metrics import Metric


def validators_for(cfg: TrainConfig) -> list[Validator]:
    """The extra validation metrics ``cfg`` asks for (``run.valid_bleu``)."""
    return [bleu_validator(cfg)] if cfg.run.valid_bleu else []


def bleu_validator(cfg: TrainConfig) -> Validator:
    """BLEU on the validation split, decoded from its ids with ``run.valid_beam``."""
    data = load_prepared(cfg.data.dir)
    valid = data.split(cfg.data.valid_split)
    sources = [valid.src[i].tolist() for i in range(len(valid))]
    references = [data.tgt_tokenizer.decode(valid.tgt[i].tolist()) for i in range(len(valid))]
    tokenized = bool(data.manifest["pretokenized"])
    options = SearchOptions(beam=cfg.run.valid_beam, batch_tokens=cfg.data.valid_max_tokens)

    def validate(model) -> dict[Metric, float]:
        # the weights change between validations: no packed copy (its kernels would stay)
        translator = Translator(model, data.src_tokenizer, data.tgt_tokenizer, packed=False)
        hyps = [t[0].text for t in translator.translate_ids(sources, options)]
        bleu = corpus_scores(hyps, references, tokenized=tokenized).bleu
        return {Metric.BLEU: bleu, Metric.BLEU_BEAM: float(options.beam)}

    return validate
