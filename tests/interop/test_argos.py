"""``aiayn export argos``: the real ``argostranslate`` installs the package and translates with
it offline (any download fails the test), as CTranslate2 does with aiayn's export; the
package's sentence splitter splits as MiniSBD's format says."""

from __future__ import annotations

import json
import sys
import urllib.request
import zipfile

import pytest

ctranslate2 = pytest.importorskip("ctranslate2", reason="ctranslate2 is a dev dependency")
pytest.importorskip("argostranslate", reason="argostranslate is a dev dependency")
pytest.importorskip("onnx", reason="onnx is a dev dependency")

import sentencepiece as spm  # noqa: E402

from aiayn.cli import main  # noqa: E402
from aiayn.interop.ct2 import export_ct2  # noqa: E402

from .models import SRC_TEXT, model_dir  # noqa: E402


@pytest.fixture
def offline(monkeypatch, tmp_path):
    """Argos's directories in ``tmp_path``, and no network: every download raises."""
    for name in ("HOME", "XDG_DATA_HOME", "XDG_CONFIG_HOME", "XDG_CACHE_HOME"):
        monkeypatch.setenv(name, str(tmp_path / "argos" / name.lower()))
    monkeypatch.setenv("ARGOS_PACKAGES_DIR", str(tmp_path / "argos" / "packages"))

    def no_network(*args, **kwargs):
        raise AssertionError(f"a download was attempted: {args[:1]}")

    monkeypatch.setattr(urllib.request, "urlopen", no_network)
    monkeypatch.setattr(urllib.request, "urlretrieve", no_network)
    for name in [m for m in sys.modules if m.startswith(("argostranslate", "minisbd"))]:
        monkeypatch.delitem(sys.modules, name)  # settings are read when first imported
    return tmp_path


def test_argos_translates_offline_as_ctranslate2_does(offline):
    model = model_dir(offline / "m", languages=("en", "de"))
    (model / "README.md").write_text("# model card\n")
    package = offline / "en_de.argosmodel"
    assert main(["export", "argos", str(model), "--out", str(package)]) == 0

    import argostranslate.package
    import argostranslate.translate

    argostranslate.package.install_from_path(package)
    [installed] = argostranslate.package.get_installed_packages()
    assert (installed.from_code, installed.to_code) == ("en", "de")
    assert (installed.from_name, installed.to_name) == ("English", "German")
    assert installed.get_readme() == "# model card\n"

    sentences = SRC_TEXT[:4]
    text = ". ".join(sentences) + "."  # one paragraph, four sentences
    theirs = argostranslate.translate.translate(text, "en", "de")

    # CTranslate2 on aiayn's export, with Argos's settings, sentence by sentence
    export_ct2(model, offline / "ct2")
    sp = spm.SentencePieceProcessor(model_file=str(model / "spm.model"))
    translator = ctranslate2.Translator(str(offline / "ct2"), compute_type="auto")
    results = translator.translate_batch(
        [sp.encode(s + ".", out_type=str) for s in sentences],
        replace_unknowns=True,
        beam_size=4,
        length_penalty=0.2,
    )
    pieces = [p for r in results for p in r.hypotheses[0]]
    expected = sp.decode_pieces(pieces).replace("▁", " ").replace("_", " ").lstrip(" ")
    assert theirs == expected
    assert len(pieces) > 4  # the random model wrote something (its words may run together)


def test_the_splitter_ends_sentences_where_it_says(offline):
    from minisbd import SBDetect

    from aiayn.interop.splitter import write_splitter

    detector = SBDetect(str(write_splitter(offline / "en.onnx", "en")), use_gpu=False)
    text = "It costs 3.5 euros. Really?  Yes!No… 好。好！ end"
    assert detector.sentences(text) == [
        "It costs 3.5 euros.",
        "Really?",
        "Yes!No…",
        "好。",
        "好！",
        "end",
    ]


def test_the_package_holds_what_argos_reads(tmp_path):
    model = model_dir(tmp_path / "m", languages=("pt-BR", "en"))
    out = tmp_path / "p.argosmodel"
    assert main(["export", "argos", str(model), "--out", str(out), "--version", "1.2"]) == 0
    with zipfile.ZipFile(out) as z:
        names = set(z.namelist())
        top = "translate-pt-BR_en-1_2/"
        assert {
            top + n for n in ("metadata.json", "sentencepiece.model", "model/model.bin")
        } <= names
        assert top + "minisbd/pt-BR.onnx" in names
        metadata = json.loads(z.read(top + "metadata.json"))
    assert metadata["from_code"] == "pt-BR" and metadata["package_version"] == "1.2"
    assert main(["export", "argos", str(model), "--out", str(out)]) == 2  # exists
    assert main(["export", "argos", str(model), "--out", str(out), "--overwrite"]) == 0
