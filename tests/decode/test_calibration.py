"""The confidence's calibration: a monotone curve to the expected sentence chrF, fitted on a
validation set (``aiayn calibrate``), kept in the model directory and applied by the
Translator to every confidence, its sentences' and ``min_confidence``'s comparison too."""

import dataclasses
import itertools
import json
import shutil

import numpy as np
import pytest
from scipy.stats import spearmanr

from aiayn.cli import main
from aiayn.eval.calibration_fit import CalibrationError, fit_calibration
from aiayn.translate.calibration import (
    CALIBRATION_FILE,
    Calibration,
    read_calibration,
    write_calibration,
)
from aiayn.translate.translator import SearchOptions, TranslationError, Translator

LINES = ["the dog runs on the street . A small cat sleeps under the big tree.", ""]
OPTIONS = SearchOptions(beam=2)


def test_a_calibration_is_monotone_and_keeps_nothing_to_translate_certain():
    calibration = Calibration(slope=2.0, intercept=1.0, lines=100)
    values = [calibration(c) for c in np.linspace(0.01, 0.99, 50)]
    assert all(a < b for a, b in itertools.pairwise(values))
    assert all(0 < v < 1 for v in values) and calibration(1.0) == 1.0
    assert calibration(0.5) == pytest.approx(1 / (1 + np.exp(-(2 * np.log(0.5) + 1))))


def test_the_fit_recovers_a_known_curve_and_keeps_the_ranking():
    rng = np.random.default_rng(0)
    raw = rng.uniform(0.2, 0.95, 400)
    truth = 1 / (1 + np.exp(-(1.5 * np.log(raw) + 0.8)))
    chrf = np.clip(truth + rng.normal(0, 0.05, 400), 0, 1)
    fit = fit_calibration(raw.tolist(), chrf.tolist(), fitted_on="synthetic")
    c = fit.calibration
    assert c.slope == pytest.approx(1.5, abs=0.3) and c.intercept == pytest.approx(0.8, abs=0.2)
    assert fit.gap_calibrated < fit.gap_raw
    calibrated = [c(r) for r in raw]
    assert spearmanr(calibrated, chrf).statistic == pytest.approx(fit.spearman, abs=1e-12)


@pytest.mark.parametrize(
    "raw, chrf, message",
    [
        ([0.5] * 10, [0.5] * 10, "10 validation lines: a calibration needs at least 50"),
        (np.linspace(0.1, 0.9, 60), np.linspace(0.9, 0.1, 60), "does not rank"),
    ],
)
def test_a_validation_set_that_cannot_calibrate_is_one_line(raw, chrf, message):
    with pytest.raises(CalibrationError, match=message) as e:
        fit_calibration(list(raw), list(chrf))
    assert "\n" not in str(e.value)


@pytest.fixture
def calibrated_dir(trained_model_dir, tmp_path):
    model = tmp_path / "model"
    shutil.copytree(trained_model_dir, model)
    return model


def test_the_translator_reports_the_calibrated_confidence_everywhere(calibrated_dir):
    own = Translator.from_dir(calibrated_dir).translate(LINES, OPTIONS)
    calibration = Calibration(slope=1.3, intercept=0.4, lines=60, fitted_on="test")
    write_calibration(calibrated_dir, calibration)
    translator = Translator.from_dir(calibrated_dir)
    assert translator.calibration == calibration
    found = translator.translate(LINES, OPTIONS)
    [[raw], [empty_raw]], [[best], [empty]] = own, found
    assert best.text == raw.text and best.confidence == pytest.approx(calibration(raw.confidence))
    assert [s.confidence for s in best.sentences] == pytest.approx(
        [calibration(s.confidence) for s in raw.sentences]
    )
    assert empty.confidence == empty_raw.confidence == 1.0
    minimum = dataclasses.replace(OPTIONS, min_confidence=best.confidence + 1e-6)
    [[flagged], _] = translator.translate(LINES, minimum)  # compared with the calibrated value
    assert flagged.flagged and flagged.text == LINES[0]
    below = dataclasses.replace(OPTIONS, min_confidence=best.confidence - 1e-6)
    assert not translator.translate(LINES, below)[0][0].flagged


@pytest.mark.parametrize(
    "content, message",
    [
        ("{", "calibration.json: not a calibration (JSONDecodeError"),
        ('{"slope": -1, "intercept": 0, "lines": 9}', "a finite positive slope"),
        ('{"slope": 1}', "not a calibration (KeyError"),
    ],
)
def test_a_broken_calibration_file_is_one_line(calibrated_dir, content, message):
    (calibrated_dir / CALIBRATION_FILE).write_text(content)
    with pytest.raises(TranslationError, match=message.replace("(", r"\(")) as e:
        read_calibration(calibrated_dir)
    assert "\n" not in str(e.value)


def test_aiayn_calibrate_fits_on_a_validation_set_and_writes_the_model_directory(
    calibrated_dir, tiny_dataset, tmp_path, capsys
):
    corpus = tiny_dataset.parent / "corpus"
    src, ref = tmp_path / "valid.src", tmp_path / "valid.tgt"
    for path, side in ((src, "src"), (ref, "tgt")):
        lines = [
            line
            for part in ("valid", "test", "train")
            for line in (corpus / f"{part}.{side}").read_text().splitlines()
        ]
        path.write_text("\n".join(lines[:120]) + "\n")
    argv = ["calibrate", str(calibrated_dir), "--src", str(src), "--ref", str(ref), "--beam", "2"]
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert "120 lines: Spearman(confidence, sentence chrF)" in out and "written:" in out
    written = json.loads((calibrated_dir / CALIBRATION_FILE).read_text())
    assert written["lines"] == 120 and written["slope"] > 0
    assert written["target"] == "expected sentence chrF (0 to 1)"
    ref.write_text("one line\n")
    assert main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1].endswith("120 source lines but 1 references"), err


def test_constant_confidences_are_one_error_and_no_library_warning():
    import warnings

    from aiayn.eval.calibration_fit import CalibrationError, fit_calibration

    with warnings.catch_warnings():
        warnings.simplefilter("error")  # scipy's ConstantInputWarning would fail here
        with pytest.raises(CalibrationError, match="does not rank"):
            fit_calibration([0.5] * 60, [0.1 * (i % 7) for i in range(60)])
