"""Corpus BLEU (Papineni et al., 2002) and chrF (Popović, 2015) via sacreBLEU, with signatures.

BLEU's tokenisation follows the target language, as sacreBLEU's own ``-l SRC-TGT`` does:
Korean is segmented into morphemes by MeCab-ko (``ko-mecab``), Japanese by MeCab with IPADIC
(``ja-mecab``), Chinese into characters (``zh``), every other language by ``13a``. Spaces do
not delimit Korean morphemes, so 13a BLEU on Korean counts whole eojeol (word + particles)
and is far lower and noisier. chrF needs no segmentation and is always reported beside it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import get_args

from sacrebleu.metrics import BLEU, CHRF

from aiayn.config import BleuTokenize
from aiayn.errors import AiaynError
from aiayn.eval.outputs import OutputCheck, check_outputs

# sacreBLEU's tokenizers that aiayn offers (``--tokenize``): those that need no download.
BLEU_TOKENIZERS: tuple[str, ...] = tuple(t for t in get_args(BleuTokenize) if t)

# ISO 639-3 codes (and FLORES-200's ``kor_Hang``-style codes, by their first part) of the
# languages whose BLEU tokenizer is not 13a, to the two-letter codes sacreBLEU maps.
_ISO_639_3 = {"kor": "ko", "jpn": "ja", "zho": "zh", "cmn": "zh", "yue": "zh"}

# The target languages whose BLEU tokenizer is not 13a (sacreBLEU's own choice for
# ``-l SRC-TGT``; tests/eval checks that the two agree).
TOKENIZER_BY_LANGUAGE = {"ko": "ko-mecab", "ja": "ja-mecab", "zh": "zh"}
# Region subtags of those languages' locales (``ko-KR``, ``zh-tw``): not a pair's target.
_REGIONS = frozenset({"kr", "kp", "jp", "cn", "tw", "hk", "mo", "sg", "hans", "hant"})
DEFAULT_TOKENIZER = "13a"

# What a tokenizer needs beyond sacreBLEU itself, as pip installs it.
_EXTRAS = {"ko-mecab": "sacrebleu[ko]", "ja-mecab": "sacrebleu[ja]"}


class ScoringError(AiaynError, ValueError):
    """BLEU cannot be computed as asked (an unknown tokenizer, or one not installed), or
    translations and references that cannot be scored together."""


@dataclass(frozen=True)
class Scores:
    """Corpus BLEU and chrF with the sacreBLEU signatures that say how they were computed,
    and the empty and degenerate translations among those scored (``outputs``)."""

    bleu: float
    chrf: float
    bleu_signature: str
    chrf_signature: str
    outputs: OutputCheck | None = None

    def __str__(self) -> str:
        warning = self.outputs.warning if self.outputs else None
        return (
            f"BLEU {self.bleu:.2f}  ({self.bleu_signature})\n"
            f"chrF {self.chrf:.2f}  ({self.chrf_signature})"
        ) + (f"\n{warning}" if warning else "")


def language_code(lang: str) -> str:
    """The two-letter code sacreBLEU keys its tokenizers on: ``ko_KR``, ``kor_Hang``,
    ``KO`` -> ``ko``; sacreBLEU's own pair syntax ``SRC-TGT`` (``en-ko``, ``de-zh``) names its
    target (``ko``), a locale (``ko-KR``, ``zh-tw``) its language; codes it does not know pass
    through lowercased."""
    parts = [p.lower() for p in lang.strip().replace("-", "_").split("_")]
    first = _ISO_639_3.get(parts[0], parts[0])
    if len(parts) == 2 and "-" in lang and parts[1] not in _REGIONS:
        second = _ISO_639_3.get(parts[1], parts[1])
        if TOKENIZER_BY_LANGUAGE.get(first) or TOKENIZER_BY_LANGUAGE.get(second):
            return second  # a pair whose target's tokenizer is not its source's
    return first


def bleu_tokenizer(tgt_lang: str = "", tokenize: str | None = None) -> str:
    """The sacreBLEU tokenizer BLEU uses: ``tokenize`` when given, else the target
    language's (``ko-mecab``, ``ja-mecab``, ``zh``), else ``13a``."""
    if tokenize:
        if tokenize not in BLEU_TOKENIZERS:
            raise ScoringError(
                f"unknown BLEU tokenizer {tokenize!r}; choose one of {', '.join(BLEU_TOKENIZERS)}"
            )
        return tokenize
    return TOKENIZER_BY_LANGUAGE.get(language_code(tgt_lang), DEFAULT_TOKENIZER)


def make_bleu(tgt_lang: str = "", tokenize: str | None = None) -> BLEU:
    """sacreBLEU's BLEU with the tokenizer :func:`bleu_tokenizer` chooses.

    Raises:
        ScoringError: the tokenizer is unknown, or what it needs (MeCab-ko and its
            dictionary for ``ko-mecab``) is not installed; never a silent fallback to 13a.
    """
    name = bleu_tokenizer(tgt_lang, tokenize)
    try:
        # force: text the caller declared tokenised ("none") is not second-guessed.
        return BLEU(tokenize=name, force=name == "none")
    except (ImportError, RuntimeError) as e:  # sacreBLEU's message when MeCab is missing
        extra = _EXTRAS.get(name, "sacrebleu")
        raise ScoringError(
            f"BLEU with the {name} tokenizer needs packages that are not installed "
            f"({type(e).__name__}); install them with: python3 -m pip install '{extra}'"
        ) from None


def bleu_signature(tgt_lang: str = "", tokenize: str | None = None) -> str:
    """The sacreBLEU signature of the BLEU ``corpus_scores`` computes with these arguments
    (one reference)."""
    return _signature(make_bleu(tgt_lang, tokenize))


def chrf_signature() -> str:
    """The sacreBLEU signature of the chrF ``corpus_scores`` computes (one reference)."""
    return _signature(CHRF())


def _signature(metric: BLEU | CHRF) -> str:
    metric.corpus_score(["a"], [["a"]])  # sacreBLEU signs a metric once it has scored
    return str(metric.get_signature())


def corpus_scores(
    hypotheses: Sequence[str],
    references: Sequence[str],
    *,
    tgt_lang: str = "",
    tokenize: str | None = None,
    tokenized: bool = False,
) -> Scores:
    """BLEU and chrF of detokenised, cased text, BLEU tokenised for ``tgt_lang`` (see the
    module docstring) unless ``tokenize`` names a sacreBLEU tokenizer.

    ``tokenized`` is ``tokenize="none"``: text that is already tokenised and lowercased, the
    way the research literature scores Multi30k.

    Raises:
        ScoringError: see :func:`make_bleu`.
    """
    if len(hypotheses) != len(references):
        raise ScoringError(f"{len(hypotheses)} hypotheses but {len(references)} references")
    if not any(r.strip() for r in references):
        raise ScoringError(
            f"nothing to score: the {len(references)} references are empty"
            if references
            else "nothing to score: no sentences"
        )
    bleu = make_bleu(tgt_lang, "none" if tokenized else tokenize)
    chrf = CHRF()
    return Scores(
        bleu=bleu.corpus_score(list(hypotheses), [list(references)]).score,
        chrf=chrf.corpus_score(list(hypotheses), [list(references)]).score,
        bleu_signature=str(bleu.get_signature()),
        chrf_signature=str(chrf.get_signature()),
        outputs=check_outputs(hypotheses, references),
    )
