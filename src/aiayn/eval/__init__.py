"""Evaluation: BLEU and chrF with sacreBLEU, BLEU tokenised for the target language."""

from aiayn.eval.bleu import (
    BLEU_TOKENIZERS,
    Scores,
    ScoringError,
    bleu_signature,
    bleu_tokenizer,
    chrf_signature,
    corpus_scores,
    language_code,
    make_bleu,
)

__all__ = [
    "BLEU_TOKENIZERS",
    "Scores",
    "ScoringError",
    "bleu_signature",
    "bleu_tokenizer",
    "chrf_signature",
    "corpus_scores",
    "language_code",
    "make_bleu",
]
