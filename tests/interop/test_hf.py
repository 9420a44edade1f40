"""``aiayn export hf``: transformers loads the export with its tokenizer, and its logits,
greedy and beam outputs and texts are aiayn's; ``import marian`` then ``export hf`` gives
back the original files."""

from __future__ import annotations

import json

import pytest
import torch
from safetensors.torch import load_file

transformers = pytest.importorskip("transformers", reason="transformers is a dev dependency")

from aiayn.cli import main  # noqa: E402
from aiayn.data import load_prepared  # noqa: E402
from aiayn.decode.guards import EXPORT_NO_REPEAT_NGRAM  # noqa: E402
from aiayn.interop.hf import export_hf  # noqa: E402
from aiayn.interop.marian import import_marian  # noqa: E402
from aiayn.translate.translator import SearchOptions, Translator  # noqa: E402

from . import test_marian  # noqa: E402
from .models import SRC_TEXT, UNGUARDED, model_dir  # noqa: E402


@pytest.fixture(scope="module")
def exported(trained_model_dir, tmp_path_factory):
    out = tmp_path_factory.mktemp("hf") / "hf"
    assert main(["export", "hf", str(trained_model_dir), "--out", str(out)]) == 0
    return out


@pytest.fixture(scope="module")
def sources(trained_model_dir, tiny_dataset) -> tuple[list[list[int]], list[str]]:
    """The test split's source ids, and their text."""
    test = load_prepared(tiny_dataset).split("test")
    ids = [test.src[i].tolist() for i in range(min(len(test), 12))]
    tokenizer = Translator.from_dir(trained_model_dir).src_tokenizer
    return ids, [tokenizer.decode(s) for s in ids]


def test_the_export_carries_the_repetition_guard(exported):
    """Hugging Face's generate bans the repeated n-grams aiayn's repetition stop ends."""
    config = transformers.GenerationConfig.from_pretrained(exported)
    assert config.no_repeat_ngram_size == EXPORT_NO_REPEAT_NGRAM


def _generate(hf, ids: list[int], beams: int) -> list[int]:
    """Hugging Face's search with aiayn's settings: the same length limit, no length
    normalisation, and the export's banned tokens."""
    c = hf.config
    x = torch.tensor([[*ids, c.eos_token_id]])
    out = hf.generate(
        input_ids=x,
        num_beams=beams,
        do_sample=False,
        length_penalty=0.0,
        max_new_tokens=x.size(1) + 50,  # aiayn's limit: source (with EOS) + max_len_b
        no_repeat_ngram_size=0,  # the export's repetition guard off, as aiayn's (UNGUARDED)
    )[0].tolist()[1:]  # without the decoder's start
    return out[: out.index(c.eos_token_id)] if c.eos_token_id in out else out


@pytest.mark.parametrize("beams", [1, 4])
def test_greedy_and_beam_search_equal_aiayns(exported, trained_model_dir, sources, beams):
    hf = transformers.MarianMTModel.from_pretrained(exported).eval()
    ours = Translator.from_dir(trained_model_dir)
    ids, _ = sources
    found = ours.translate_ids(ids, SearchOptions(beam=beams, alpha=0.0, **UNGUARDED))
    for source, [hypothesis] in zip(ids, found, strict=True):
        assert hypothesis.tokens == _generate(hf, source, beams), source
    assert any(len(h[0].tokens) > 2 for h in found)


def test_the_tokenizer_and_texts_are_aiayns(exported, trained_model_dir, sources):
    tokenizer = transformers.AutoTokenizer.from_pretrained(exported)
    hf = transformers.AutoModelForSeq2SeqLM.from_pretrained(exported).eval()
    ids, texts = sources
    eos = hf.config.eos_token_id
    assert tokenizer(texts)["input_ids"] == [[*s, eos] for s in ids]
    texts = texts[:8]
    ours = Translator.from_dir(trained_model_dir).translate(
        texts, SearchOptions(beam=1, **UNGUARDED)
    )
    expected = [h[0].text for h in ours]
    pipe = None
    if "translation" in transformers.pipelines.SUPPORTED_TASKS:  # transformers < 5
        pipe = transformers.pipeline("translation", model=str(exported))
    theirs = []
    for source, text in zip(ids, texts, strict=False):
        limit = len(source) + 1 + 50  # aiayn's: source with EOS + max_len_b
        if pipe is not None:
            [result] = pipe([text], num_beams=1, max_new_tokens=limit, no_repeat_ngram_size=0)
            theirs.append(result["translation_text"])
        else:  # transformers 5 removed the translation pipeline: generate, then decode
            generated = hf.generate(
                **tokenizer([text], return_tensors="pt"),
                num_beams=1,
                max_new_tokens=limit,
                no_repeat_ngram_size=0,
            )
            theirs.append(tokenizer.decode(generated[0], skip_special_tokens=True))
    # a hypothesis cut at its length limit may end in a bare word-start piece: aiayn's
    # SentencePiece decoding keeps its space, Hugging Face's decode strips it
    assert [t.strip() for t in theirs] == [t.strip() for t in expected]
    assert any(len(t.split()) > 1 for t in expected)


@pytest.mark.parametrize(
    ("tokenizer", "model"),
    [
        ("joint", {"positional": "sinusoidal", "activation": "gelu", "output_bias": True}),
        ("joint", {"positional": "sinusoidal_concat", "activation": "swish", "tie_output": False}),
        ("separate", {"bias": False, "tie_output": True}),
        ("separate", {"tie_output": False, "output_bias": True}),
        ("joint", {"share_embeddings": False, "bias": False}),
        ("joint", {"n_encoder_layers": 3, "n_decoder_layers": 1}),  # a student's shape
    ],
)
def test_logits_equal_aiayns_for_every_exportable_architecture(tmp_path, tokenizer, model):
    directory = model_dir(tmp_path, tokenizer=tokenizer, **model)
    export_hf(directory, tmp_path / "hf")
    hf = transformers.MarianMTModel.from_pretrained(tmp_path / "hf").eval()
    hf_tokenizer = transformers.AutoTokenizer.from_pretrained(tmp_path / "hf")
    ours = Translator.from_dir(directory, profile="reference")
    batch = hf_tokenizer(SRC_TEXT[:3], padding=True, return_tensors="pt")
    s = ours.model.specials
    src = batch["input_ids"].masked_fill(batch["attention_mask"] == 0, s.pad)
    g = torch.Generator().manual_seed(1)
    decoder_in = torch.randint(4, 60, (3, 7), generator=g)
    decoder_in[:, 0] = s.bos
    with torch.no_grad():
        expected = ours.model(src, decoder_in)
        theirs = hf(
            input_ids=batch["input_ids"],
            attention_mask=batch["attention_mask"],
            decoder_input_ids=decoder_in,
        ).logits
    torch.testing.assert_close(theirs, expected, atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("separate", [False, True])
def test_import_then_export_gives_back_the_original(tmp_path, monkeypatch, separate):
    monkeypatch.setattr(test_marian, "_teach", lambda model: None)  # random weights will do
    test_marian._marian_dir(tmp_path / "hf", separate=separate)
    import_marian(tmp_path / "hf", tmp_path / "aiayn")
    export_hf(tmp_path / "aiayn", tmp_path / "back")
    original = load_file(tmp_path / "hf" / "model.safetensors")
    back = load_file(tmp_path / "back" / "model.safetensors")
    assert set(original) <= set(back)
    for name, tensor in original.items():
        assert torch.equal(back[name], tensor), name
    names = ["source.spm", "target.spm"]
    for name in names:
        assert (tmp_path / "back" / name).read_bytes() == (tmp_path / "hf" / name).read_bytes()
    for name in ["vocab.json"] + (["target_vocab.json"] if separate else []):
        assert json.loads((tmp_path / "back" / name).read_text()) == json.loads(
            (tmp_path / "hf" / name).read_text()
        )
    config = json.loads((tmp_path / "back" / "config.json").read_text())
    assert config["share_encoder_decoder_embeddings"] is not separate


def test_the_model_card_travels_and_overwrite_replaces_only_an_export(tmp_path):
    directory = model_dir(tmp_path / "m")
    (directory / "README.md").write_text("# card\n")
    export_hf(directory, tmp_path / "hf")
    card = (tmp_path / "hf" / "README.md").read_text()
    assert card.startswith("---\nlibrary_name: transformers\npipeline_tag: translation\n")
    assert "language:\n- en\n- de\n" in card and card.endswith("---\n\n# card\n")
    assert main(["export", "hf", str(directory), "--out", str(tmp_path / "hf")]) == 2
    assert main(["export", "hf", str(directory), "--out", str(tmp_path / "hf"), "--overwrite"]) == 0
