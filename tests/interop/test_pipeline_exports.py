"""``pipeline.exports``: a recipe ends with the model in CTranslate2's, Hugging Face's and
Argos Translate's formats, each loadable by its tool; a model a format cannot hold is
refused before any work."""

from __future__ import annotations

import contextlib
import shutil
import zipfile

import pytest

ctranslate2 = pytest.importorskip("ctranslate2", reason="ctranslate2 is a dev dependency")
transformers = pytest.importorskip("transformers", reason="transformers is a dev dependency")
pytest.importorskip("onnx", reason="onnx is a dev dependency")

from aiayn.config_io import load_toml, recipe_from_dict  # noqa: E402
from aiayn.interop.destination import ExportError  # noqa: E402
from aiayn.pipeline import STAGES, Job, run_pipeline  # noqa: E402

from ..test_pipeline import _own_corpus_recipe  # noqa: E402
from ..train.conftest import Messages  # noqa: E402
from .models import model_dir  # noqa: E402


def _recipe(tmp_path, exports: list[str], **model):
    recipe_file = _own_corpus_recipe(tmp_path, max_updates=4)
    values = load_toml(str(recipe_file))
    values["pipeline"] |= {"exports": exports, "src_lang": "en", "tgt_lang": "de"}
    values["model"] |= model
    return recipe_from_dict(values), recipe_file.parent


def _job(recipe, work, recipe_dir, reporter, resources) -> Job:
    return Job(
        recipe=recipe,
        work=work,
        corpus_from=None,
        recipe_dir=recipe_dir,
        reporter=reporter,
        resources=resources,
        release_memory=lambda: None,
    )


def test_the_last_stage_writes_every_export(tmp_path):
    recipe, recipe_dir = _recipe(tmp_path, ["ct2", "hf", "argos"])
    work = tmp_path / "work"
    shutil.copytree(model_dir(tmp_path / "m"), work / "model")  # what "average" leaves
    [stage] = [s for s in STAGES if s.name == "export"]
    assert STAGES[-1] is stage
    messages = Messages()
    with contextlib.ExitStack() as resources:
        job = _job(recipe, work, recipe_dir, messages, resources)
        assert stage.when(job)
        stage.run(job)
        stage.run(job)  # an earlier export is replaced
    exports = work / "exports"
    translator = ctranslate2.Translator(str(exports / "ct2"))
    assert translator.translate_batch([["▁a"]])[0].hypotheses
    assert (exports / "ct2" / "source.spm").is_file()
    hf = transformers.AutoModelForSeq2SeqLM.from_pretrained(exports / "hf")
    assert hf.config.model_type == "marian"
    with zipfile.ZipFile(exports / "en_de.argosmodel") as z:
        assert "translate-en_de-1_0/model/model.bin" in z.namelist()
    assert sum(line.startswith("exported argos:") for line in messages) == 2


def test_no_exports_no_stage(tmp_path):
    recipe, recipe_dir = _recipe(tmp_path, [])
    with contextlib.ExitStack() as resources:
        job = _job(recipe, tmp_path, recipe_dir, Messages(), resources)
        assert not any(s.when(job) for s in STAGES if s.name in ("export", "check exports"))


def test_a_model_an_export_cannot_hold_is_refused_first(tmp_path):
    recipe, recipe_dir = _recipe(tmp_path, ["hf"], norm_first=True)
    with pytest.raises(ExportError, match="norm_first"):
        run_pipeline(recipe, tmp_path / "work", recipe_dir=recipe_dir)
    assert not (tmp_path / "work" / "data").exists()
