"""What a confidence means: a model's own confidence mapped to the sentence chrF its
translations of that confidence score on held-out text.

The model's own confidence (``aiayn.translate.terms.confidence``: the geometric mean of its
tokens' probabilities) ranks translations, but its value is no quality: a model that spreads
its probability over many good wordings is unsure of each. A calibration, fitted on a
validation set by ``aiayn calibrate`` (``aiayn.eval.calibration_fit``) and kept in the model
directory as ``calibration.json``, maps it to the **expected sentence chrF** (0 to 1) of a
translation with that confidence: a logistic curve of the mean token log-probability,
``sigmoid(slope * log(confidence) + intercept)`` with ``slope > 0``. It is monotone, so
it ranks translations exactly as the model's own confidence does; a ``--min-confidence``
of 0.5 then gives back the source of the lines expected to score below chrF 50.
"""

from __future__ import annotations

import json
import math
import os
from dataclasses import asdict, dataclass
from pathlib import Path

from aiayn.translate.inputs import TranslationError

CALIBRATION_FILE = "calibration.json"
TARGET = "expected sentence chrF (0 to 1)"  # what a calibrated confidence is


@dataclass(frozen=True)
class Calibration:
    """``sigmoid(slope * log(confidence) + intercept)``, fitted on ``lines`` validation
    sentences (``fitted_on`` names them)."""

    slope: float
    intercept: float
    lines: int
    fitted_on: str = ""
    target: str = TARGET

    def __post_init__(self) -> None:
        finite = all(math.isfinite(v) for v in (self.slope, self.intercept))
        if not finite or self.slope <= 0 or self.lines < 1:
            raise TranslationError(
                f"a calibration needs a finite positive slope, a finite intercept and its "
                f"lines, got slope {self.slope!r}, intercept {self.intercept!r}, "
                f"lines {self.lines!r}"
            )

    def __call__(self, confidence: float) -> float:
        """The calibrated value of a model's own ``confidence`` (in [0, 1]); 1 (nothing
        to translate) stays 1."""
        if confidence >= 1.0:
            return 1.0
        z = self.slope * math.log(max(confidence, 1e-300)) + self.intercept
        return 1.0 / (1.0 + math.exp(-z)) if z >= 0 else math.exp(z) / (1.0 + math.exp(z))


def read_calibration(directory: str | Path) -> Calibration | None:
    """The calibration kept in a model directory; None when it has none.

    Raises:
        TranslationError: ``calibration.json`` is unreadable or not a calibration (one line).
    """
    path = Path(directory) / CALIBRATION_FILE
    if not path.is_file():
        return None
    try:
        found = json.loads(path.read_text(encoding="utf-8"))
        return Calibration(
            slope=float(found["slope"]),
            intercept=float(found["intercept"]),
            lines=int(found["lines"]),
            fitted_on=str(found.get("fitted_on", "")),
        )
    except (OSError, UnicodeDecodeError, ValueError, TypeError, KeyError) as e:
        raise TranslationError(
            f"{path}: not a calibration ({type(e).__name__}: {e}); "
            "remove it or write it again with aiayn calibrate"
        ) from None


def write_calibration(directory: str | Path, calibration: Calibration) -> Path:
    """``calibration.json`` in a model directory, written beside and moved into place."""
    path = Path(directory) / CALIBRATION_FILE
    tmp = path.with_name(f".{CALIBRATION_FILE}.{os.getpid()}.tmp")
    tmp.write_text(json.dumps(asdict(calibration), indent=1) + "\n", encoding="utf-8")
    os.replace(tmp, path)
    return path
