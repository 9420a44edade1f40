"""Evaluation: BLEU and chrF with sacreBLEU."""

from aiayn.eval.bleu import Scores, corpus_scores

__all__ = ["Scores", "corpus_scores"]
