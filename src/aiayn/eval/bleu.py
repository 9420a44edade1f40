"""Corpus BLEU (Papineni et al., 2002) and chrF (Popović, 2015) via sacreBLEU, with signatures."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from sacrebleu.metrics import BLEU, CHRF


@dataclass(frozen=True)
class Scores:
    """Corpus BLEU and chrF with the sacreBLEU signatures that say how they were computed."""

    bleu: float
    chrf: float
    bleu_signature: str
    chrf_signature: str

    def __str__(self) -> str:
        return (
            f"BLEU {self.bleu:.2f}  ({self.bleu_signature})\n"
            f"chrF {self.chrf:.2f}  ({self.chrf_signature})"
        )


def corpus_scores(
    hypotheses: Sequence[str], references: Sequence[str], *, tokenized: bool = False
) -> Scores:
    """Score detokenised, cased text (sacreBLEU's default 13a tokenisation), or, with
    ``tokenized``, text that is already tokenised and lowercased (``tokenize='none'``, the
    way the research literature scores Multi30k)."""
    if len(hypotheses) != len(references):
        raise ValueError(f"{len(hypotheses)} hypotheses but {len(references)} references")
    # force: tokenised text is what the caller declared, so sacreBLEU's "looks tokenised"
    # warning does not apply.
    bleu = BLEU(tokenize="none", force=True) if tokenized else BLEU()
    chrf = CHRF()
    return Scores(
        bleu=bleu.corpus_score(list(hypotheses), [list(references)]).score,
        chrf=chrf.corpus_score(list(hypotheses), [list(references)]).score,
        bleu_signature=str(bleu.get_signature()),
        chrf_signature=str(chrf.get_signature()),
    )
