"""``aiayn export ct2``: CTranslate2's own Translator, on the exported model and tokenised text,
gives aiayn's greedy output for every sentence (float32)."""

from __future__ import annotations

import pytest

ctranslate2 = pytest.importorskip("ctranslate2", reason="ctranslate2 is a dev dependency")

from aiayn.cli import main  # noqa: E402
from aiayn.data import load_prepared  # noqa: E402
from aiayn.interop.ct2 import ExportError, export_ct2  # noqa: E402
from aiayn.translate.translator import SearchOptions, Translator  # noqa: E402

from .models import UNGUARDED  # noqa: E402
from .test_marian import WORDS, _marian_dir  # noqa: E402


@pytest.fixture
def trained(trained_model_dir):
    return trained_model_dir


def _same_greedy(model_dir, ct2_dir, sources: list[list[int]]) -> None:
    ours = Translator.from_dir(model_dir)
    found = ours.translate_ids(sources, SearchOptions(beam=1, **UNGUARDED))
    expected = [h[0].tokens for h in found]
    pieces = [ours.src_tokenizer.pieces(s) for s in sources]
    theirs = ctranslate2.Translator(str(ct2_dir), device="cpu", compute_type="float32")
    for source, piece, tokens in zip(sources, pieces, expected, strict=True):
        limit = len(source) + 1 + 50 - 1  # aiayn's: source with EOS + max_len_b, EOS included
        [result] = theirs.translate_batch([piece], beam_size=1, max_decoding_length=limit)
        assert result.hypotheses[0] == ours.tgt_tokenizer.pieces(tokens)
    assert any(len(e) > 2 for e in expected)


def test_ct2_translates_an_exported_model_like_aiayn(trained, tiny_dataset, tmp_path):
    assert main(["export", "ct2", str(trained), "--out", str(tmp_path / "ct2")]) == 0
    test = load_prepared(tiny_dataset).split("test")
    sources = [test.src[i].tolist() for i in range(len(test))]
    _same_greedy(trained, tmp_path / "ct2", sources)


def test_the_sentencepiece_models_beside_it_turn_text_into_aiayns_text(trained, tmp_path):
    import sentencepiece as spm

    export_ct2(trained, tmp_path / "ct2")
    source = spm.SentencePieceProcessor(model_file=str(tmp_path / "ct2" / "source.spm"))
    target = spm.SentencePieceProcessor(model_file=str(tmp_path / "ct2" / "target.spm"))
    ours = Translator.from_dir(trained)
    texts = ["the dog runs .", "a small cat sleeps under the red tree ."]
    expected = [h[0].text for h in ours.translate(texts, SearchOptions(beam=1, **UNGUARDED))]
    theirs = ctranslate2.Translator(str(tmp_path / "ct2"), compute_type="float32")
    results = theirs.translate_batch(source.encode(texts, out_type=str), beam_size=1)
    assert [target.decode_pieces(r.hypotheses[0]) for r in results] == expected
    assert any(expected)


def test_the_model_card_travels(tmp_path):
    from .models import model_dir

    directory = model_dir(tmp_path / "m")
    (directory / "README.md").write_text("# card\n")
    export_ct2(directory, tmp_path / "ct2")
    assert (tmp_path / "ct2" / "README.md").read_text() == "# card\n"


def test_an_imported_marian_model_exports_too(tmp_path):
    from aiayn.interop.marian import import_marian

    _marian_dir(tmp_path / "hf")
    import_marian(tmp_path / "hf", tmp_path / "aiayn")
    export_ct2(tmp_path / "aiayn", tmp_path / "ct2")
    sources = [WORDS[:n].tolist() for n in range(3, 10)]
    _same_greedy(tmp_path / "aiayn", tmp_path / "ct2", sources)


def test_a_deep_encoder_over_a_shallow_decoder_exports_too(tmp_path):
    """A student's shape (``student_*`` presets): more encoder than decoder layers."""
    from .models import SRC_TEXT, model_dir

    directory = model_dir(tmp_path / "m", n_encoder_layers=3, n_decoder_layers=1)
    export_ct2(directory, tmp_path / "ct2")
    sources = Translator.from_dir(directory).src_tokenizer.encode(SRC_TEXT[:4])
    _same_greedy(directory, tmp_path / "ct2", sources)


def test_quantised_export_loads(trained, tmp_path):
    export_ct2(trained, tmp_path / "int8", quantization="int8")
    translator = ctranslate2.Translator(str(tmp_path / "int8"), compute_type="int8")
    assert translator.translate_batch([["▁the", "▁dog"]])[0].hypotheses[0]


def test_a_language_model_is_refused(tmp_path):
    from aiayn.config import ModelConfig
    from aiayn.models import build_model
    from aiayn.store import save_model

    cfg = ModelConfig(d_model=16, n_heads=2, d_ff=32, n_encoder_layers=0).with_vocab(0, 40)
    save_model(build_model(cfg), cfg, tmp_path / "lm")
    with pytest.raises(ExportError, match="language model"):
        export_ct2(tmp_path / "lm", tmp_path / "out")
