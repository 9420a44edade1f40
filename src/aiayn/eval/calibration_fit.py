"""Fitting a confidence calibration (``aiayn.translate.calibration``) on a validation set: its
sources are translated, each translation's sentence chrF against its reference is taken as
what the confidence should predict, and a logistic curve of the mean token log-probability
is fitted to it by least squares (``scipy.optimize.curve_fit``, the slope held positive).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
from sacrebleu.metrics import CHRF
from scipy.optimize import curve_fit
from scipy.stats import spearmanr

from aiayn.errors import AiaynError
from aiayn.translate.calibration import Calibration
from aiayn.translate.translator import SearchOptions, Translation

MIN_LINES = 50  # fewer validation lines than this fit a curve to noise


class CalibrationError(AiaynError, ValueError):
    """A validation set that cannot calibrate: too few lines, or confidences that do not
    rank its translations."""


@dataclass(frozen=True)
class Fit:
    """A calibration and how it measures on the lines it was fitted on: Spearman's
    correlation between confidence and sentence chrF (the same before and after: the curve
    is monotone), and the mean absolute gap between the value and the chrF (0 to 1), raw
    and calibrated."""

    calibration: Calibration
    spearman: float
    gap_raw: float
    gap_calibrated: float


def sentence_chrf(hypotheses: Sequence[str], references: Sequence[str]) -> list[float]:
    """Each hypothesis's sentence chrF against its reference, from 0 to 1."""
    chrf = CHRF()
    return [
        chrf.sentence_score(h, [r]).score / 100 for h, r in zip(hypotheses, references, strict=True)
    ]


def _curve(log_confidence: np.ndarray, slope: float, intercept: float) -> np.ndarray:
    return 1.0 / (1.0 + np.exp(-(slope * log_confidence + intercept)))


def fit_calibration(
    confidences: Sequence[float], chrf: Sequence[float], *, fitted_on: str = ""
) -> Fit:
    """The logistic curve from the model's own confidences to the sentence chrF (0 to 1).

    Raises:
        CalibrationError: fewer than ``MIN_LINES`` lines, or confidences that do not rank
            the translations (Spearman's correlation not above 0).
    """
    if len(confidences) != len(chrf):
        raise CalibrationError(f"{len(confidences)} confidences for {len(chrf)} chrF scores")
    if len(confidences) < MIN_LINES:
        raise CalibrationError(
            f"{len(confidences)} validation lines: a calibration needs at least {MIN_LINES}"
        )
    raw = np.clip(np.asarray(confidences, dtype=float), 1e-300, 1.0)
    target = np.asarray(chrf, dtype=float)
    constant = np.ptp(raw) == 0 or np.ptp(target) == 0  # no ranking (scipy would warn)
    rho = math.nan if constant else float(spearmanr(raw, target).statistic)
    if not math.isfinite(rho) or rho <= 0:
        raise CalibrationError(
            f"the confidence does not rank the validation translations (Spearman {rho:.3f} "
            "with their sentence chrF): nothing to calibrate"
        )
    (slope, intercept), _ = curve_fit(
        _curve, np.log(raw), target, p0=(1.0, 0.0), bounds=([1e-6, -50.0], [1e3, 50.0])
    )
    calibration = Calibration(
        slope=float(slope), intercept=float(intercept), lines=len(raw), fitted_on=fitted_on
    )
    fitted = _curve(np.log(raw), slope, intercept)
    return Fit(
        calibration,
        spearman=rho,
        gap_raw=float(np.mean(np.abs(raw - target))),
        gap_calibrated=float(np.mean(np.abs(fitted - target))),
    )


def calibrate(
    translate: Callable[[list[str], SearchOptions], list[list[Translation]]],
    sources: Sequence[str],
    references: Sequence[str],
    options: SearchOptions | None = None,
    *,
    fitted_on: str = "",
) -> Fit:
    """Translate ``sources`` by ``translate`` (a ``Translator``'s or ``TranslatorProcess``'s
    ``translate``, of a model without a calibration: its own confidence) with ``options``
    (default ``SearchOptions()``) and fit a calibration to their sentence chrF.

    Raises:
        CalibrationError: as ``fit_calibration``, or sources and references that differ in
            number.
    """
    if len(sources) != len(references):
        raise CalibrationError(f"{len(sources)} source lines but {len(references)} references")
    if len(sources) < MIN_LINES:  # before translating them
        raise CalibrationError(
            f"{len(sources)} validation lines: a calibration needs at least {MIN_LINES}"
        )
    options = dataclasses.replace(options or SearchOptions(), nbest=1, min_confidence=0.0)
    found = [hyps[0] for hyps in translate(list(sources), options)]
    chrf = sentence_chrf([t.text for t in found], references)
    return fit_calibration([t.confidence for t in found], chrf, fitted_on=fitted_on)
