"""Hugging Face Marian models imported into aiayn, checked against Hugging Face on the same
inputs: teacher-forced logits, greedy search, beam search, tokenisation. The models are small
and random (no network), with a random output bias and random LayerNorms so that every part
of the import is exercised; the tokenizer is a SentencePiece model trained on the shared
corpus (or on synthetic text without it)."""

from __future__ import annotations

import gzip
import json
import shutil
from itertools import islice
from pathlib import Path

import pytest
import torch

transformers = pytest.importorskip("transformers", reason="transformers is a dev dependency")

from aiayn.cli import main  # noqa: E402
from aiayn.data import train_sentencepiece  # noqa: E402
from aiayn.interop.marian import MarianImportError, import_marian  # noqa: E402
from aiayn.translate.translator import SearchOptions, Translator  # noqa: E402

from ..conftest import data_dir  # noqa: E402
from ..data.corpora import invented_words, sentences  # noqa: E402
from .models import UNGUARDED  # noqa: E402

LANG_TOKENS = [">>fra<<", ">>deu<<", ">>spa<<"]


def _texts() -> tuple[list[str], list[str]]:
    root = data_dir() / "multi30k"
    if not (root / "train.en.gz").is_file():  # invented languages, as rich in subwords
        en, de = invented_words(500, seed=1), invented_words(500, seed=2)
        return sentences(2000, seed=1, words=en), sentences(2000, seed=2, words=de)

    def lines(lang: str) -> list[str]:
        with gzip.open(root / f"train.{lang}.gz", "rt", encoding="utf-8") as f:
            return [line.strip() for line in islice(f, 2000)]

    return lines("en"), lines("de")


_TAUGHT: dict[tuple[bool, bool, int], Path] = {}  # the models a worker taught, to copy


def _marian_dir(root, *, separate: bool = False, multilingual: bool = False, seed: int = 0):
    """A random MarianMTModel saved with Marian tokenizer files, as opus-mt ships them, and
    its tokenizer. Taught once per worker and variant, then copied (teaching is seeded)."""
    key = (separate, multilingual, seed)
    if key not in _TAUGHT or not _TAUGHT[key].is_dir():
        taught = root.parent / ("taught-" + "-".join(map(str, key)))
        if not taught.is_dir():
            _taught_marian_dir(taught, separate=separate, multilingual=multilingual, seed=seed)
        _TAUGHT[key] = taught
    shutil.copytree(_TAUGHT[key], root)
    return transformers.MarianMTModel.from_pretrained(root).eval(), _hf_tokenizer(root, separate)


def _hf_tokenizer(root, separate: bool):
    return transformers.MarianTokenizer(
        str(root / "source.spm"),
        str(root / "target.spm"),
        str(root / "vocab.json"),
        target_vocab_file=str(root / "target_vocab.json") if separate else None,
        separate_vocabs=separate,
    )


def _taught_marian_dir(root, *, separate: bool, multilingual: bool, seed: int) -> None:
    root.mkdir(parents=True)
    en, de = _texts()
    train_sentencepiece(en + de if not separate else en, root / "source.spm", vocab_size=300)
    train_sentencepiece(de + en if not separate else de, root / "target.spm", vocab_size=280)
    import sentencepiece as spm

    def vocab(model_file, extra=(), size=320):
        sp = spm.SentencePieceProcessor(model_file=str(model_file))
        pieces = [sp.id_to_piece(i) for i in range(4, sp.get_piece_size())]
        tokens = ["</s>", "<unk>", *extra, *dict.fromkeys(pieces)]
        tokens += [f"<unused{i}>" for i in range(size - 1 - len(tokens))]  # same PAD id
        return {t: i for i, t in enumerate([*tokens, "<pad>"])}

    extra = LANG_TOKENS if multilingual else ()
    src_vocab = vocab(root / "source.spm", extra)
    (root / "vocab.json").write_text(json.dumps(src_vocab))
    tgt_vocab = src_vocab
    if separate:
        tgt_vocab = vocab(root / "target.spm")
        (root / "target_vocab.json").write_text(json.dumps(tgt_vocab))
    (root / "tokenizer_config.json").write_text(
        json.dumps({"separate_vocabs": separate, "source_lang": "en", "target_lang": "de"})
    )
    v, tv = len(src_vocab), len(tgt_vocab)
    config = transformers.MarianConfig(
        vocab_size=v,
        decoder_vocab_size=tv,
        share_encoder_decoder_embeddings=not separate,
        d_model=32,
        encoder_layers=2,
        decoder_layers=2,
        encoder_attention_heads=4,
        decoder_attention_heads=4,
        encoder_ffn_dim=64,
        decoder_ffn_dim=64,
        activation_function="swish",
        scale_embedding=True,
        pad_token_id=v - 1,
        eos_token_id=0,
        decoder_start_token_id=tv - 1,
        forced_eos_token_id=0,
        max_position_embeddings=256,
    )
    torch.manual_seed(seed)
    model = transformers.MarianMTModel(config)
    with torch.no_grad():  # random bias and LayerNorms: a test that ignored them would fail
        model.final_logits_bias.normal_(0.0, 1.0)
        for module in model.modules():
            if isinstance(module, torch.nn.LayerNorm):
                module.weight.uniform_(0.5, 1.5)
                module.bias.normal_(0.0, 0.2)
    _teach(model)
    model.save_pretrained(root)


WORDS = torch.arange(10, 40)  # the ids the model is taught on


def _teach(model, steps: int = 150) -> None:
    """A few updates so that the model's outputs have structure: count up from the source's
    first word, and stop after 3 to 9 words (unknowable from the source: EOS is uncertain,
    so beam search has finished hypotheses of several lengths to rank)."""
    g = torch.Generator().manual_seed(0)
    optimizer = torch.optim.AdamW(model.parameters(), lr=3e-3)
    model.train()
    for _ in range(steps):
        src = WORDS[
            torch.randint(
                0, len(WORDS), (32, int(torch.randint(3, 12, (1,), generator=g))), generator=g
            )
        ]
        src = torch.cat([src, torch.zeros(32, 1, dtype=torch.long)], 1)  # + EOS
        length = torch.randint(3, 10, (32, 1), generator=g)
        pos = torch.arange(10)[None]
        tgt = torch.where(pos < length, src[:, :1] + pos, torch.where(pos == length, 0, -100))
        loss = model(input_ids=src, labels=tgt).loss
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    model.eval()


@pytest.fixture(scope="module", params=["shared", "separate", "multilingual"])
def marian(request, tmp_path_factory):
    root = tmp_path_factory.mktemp(request.param)
    model, tokenizer = _marian_dir(
        root / "hf",
        separate=request.param == "separate",
        multilingual=request.param == "multilingual",
    )
    import_marian(root / "hf", root / "aiayn")
    return model, tokenizer, Translator.from_dir(root / "aiayn"), request.param


SOURCES = [
    "a man in a blue shirt is standing on a ladder .",
    "two dogs play",
    "a little girl climbs into a wooden playhouse while her mother watches .",
]


def _prefixed(kind: str) -> list[str]:
    return [f">>fra<< {s}" for s in SOURCES] if kind == "multilingual" else SOURCES


def test_the_tokenizer_gives_hugging_faces_ids(marian):
    _, hf_tok, translator, kind = marian
    for text in _prefixed(kind):
        theirs = hf_tok(text)["input_ids"]
        assert translator.src_tokenizer.encode([text])[0] + [0] == theirs


def test_outputs_are_detokenised_as_hugging_face_does(marian):
    """Pieces only the source side of a shared vocabulary has (``▁ladder``) included."""
    _, hf_tok, translator, kind = marian
    ids = translator.src_tokenizer.encode(SOURCES)
    for row in ids:
        theirs = hf_tok.decode(row, skip_special_tokens=True)
        assert translator.tgt_tokenizer.decode(row) == theirs
    if kind == "shared":
        target = hf_tok.spm_target
        pieces = translator.src_tokenizer.pieces([i for row in ids for i in row])
        assert any(target.piece_to_id(p) == target.unk_id() for p in pieces)


def test_teacher_forced_logits_equal_hugging_faces_on_a_padded_batch(marian):
    hf, hf_tok, translator, kind = marian
    batch = hf_tok(_prefixed(kind), text_target=SOURCES[::-1], padding=True, return_tensors="pt")
    labels = batch["labels"]
    pad, start = hf.config.pad_token_id, hf.config.decoder_start_token_id
    labels = labels.masked_fill(labels == -100, pad)
    decoder_in = torch.cat([torch.full_like(labels[:, :1], start), labels[:, :-1]], dim=1)
    decoder_mask = torch.cat([torch.ones_like(labels[:, :1]), labels[:, :-1] != pad], dim=1)
    with torch.no_grad():
        theirs = hf(
            input_ids=batch["input_ids"],
            attention_mask=batch["attention_mask"],
            decoder_input_ids=decoder_in,
            decoder_attention_mask=decoder_mask,
        ).logits
        # aiayn pads the source with PAD and reads the padding from it
        src = batch["input_ids"].masked_fill(batch["attention_mask"] == 0, pad)
        ours = translator.model(src, decoder_in)
    real = decoder_mask.bool()
    torch.testing.assert_close(ours[real], theirs[real], atol=1e-4, rtol=1e-4)


def _hf_search(hf, ids: list[int], beams: int) -> list[int]:
    x = torch.tensor([[*ids, 0]])  # + EOS
    out = hf.generate(
        input_ids=x,
        num_beams=beams,
        do_sample=False,
        length_penalty=0.0,
        max_new_tokens=x.size(1) + 50,  # aiayn's limit: source (with EOS) + max_len_b
        bad_words_ids=[[hf.config.pad_token_id]],
    )[0].tolist()[1:]  # without the decoder's start
    return out[: out.index(0)] if 0 in out else out


@pytest.mark.parametrize("beams", [1, 4])
def test_greedy_and_beam_search_equal_hugging_faces_generate(marian, beams):
    hf, _, translator, _ = marian
    g = torch.Generator().manual_seed(7)
    sources = [
        WORDS[torch.randint(0, len(WORDS), (n,), generator=g)].tolist() for n in range(3, 12)
    ]
    options = SearchOptions(beam=beams, alpha=0.0, **UNGUARDED)  # generate has no guards
    found = translator.translate_ids(sources, options)
    lengths = set()
    for ids, [ours] in zip(sources, found, strict=True):
        assert ours.tokens == _hf_search(hf, ids, beams), ids
        lengths.add(len(ours.tokens))
    assert len(lengths) > 1 or min(lengths) > 1  # not all empty, not all alike


def test_the_target_token_option_prepends_the_language_token(marian):
    _, _, translator, kind = marian
    if kind != "multilingual":
        return
    plain = translator.translate(SOURCES, SearchOptions(beam=2), target_token=">>fra<<")
    written = translator.translate(_prefixed(kind), SearchOptions(beam=2))
    assert [h[0].tokens for h in plain] == [h[0].tokens for h in written]
    with pytest.raises(Exception, match=r"no token '>>xyz<<'.*>>deu<<"):
        translator.translate(SOURCES, target_token=">>xyz<<")


def test_the_command_imports_and_translates(tmp_path, capsys):
    _marian_dir(tmp_path / "hf")
    assert main(["import", "marian", str(tmp_path / "hf"), "--out", str(tmp_path / "m")]) == 0
    (tmp_path / "in.txt").write_text("\n".join(SOURCES) + "\n")
    assert main(["translate", "--model", str(tmp_path / "m"), "-i", str(tmp_path / "in.txt")]) == 0
    assert len(capsys.readouterr().out.splitlines()) == len(SOURCES)


@pytest.mark.parametrize(
    ("change", "words"),
    [
        ({"activation_function": "tanh"}, "activation_function = 'tanh'"),
        ({"scale_embedding": False}, "scale_embedding = False"),
        ({"decoder_ffn_dim": 128}, "encoder_ffn_dim != decoder_ffn_dim"),
        ({"normalize_before": True}, "normalize_before = True"),
    ],
)
def test_unsupported_configurations_are_named(tmp_path, change, words):
    _marian_dir(tmp_path / "hf")
    config = json.loads((tmp_path / "hf" / "config.json").read_text())
    (tmp_path / "hf" / "config.json").write_text(json.dumps({**config, **change}))
    with pytest.raises(MarianImportError, match=words):
        import_marian(tmp_path / "hf", tmp_path / "out")


def test_protected_spans_glossaries_and_confidence_work_on_an_imported_model(marian):
    """An opus-mt model gets the same terms and trust as aiayn's own, without retraining:
    each span back once, a glossary term imposed (in the pieces its vocabulary cuts it
    into), a confidence in [0, 1]."""
    from aiayn.text.glossary import Glossary

    _, _, translator, kind = marian
    token = ">>deu<<" if kind == "multilingual" else None
    line = "a man {{name}} stands at https://example.org/x with %(count)d dogs ."
    [[found]] = translator.translate([line], SearchOptions(beam=2), target_token=token)
    for span in ("{{name}}", "https://example.org/x", "%(count)d"):
        assert found.text.count(span) == 1
    assert 0 < found.confidence <= 1
    term = translator.tgt_tokenizer.decode(translator.tgt_tokenizer.encode(["Leiter"])[0])
    options = SearchOptions(beam=2, glossary=Glossary.from_pairs([("ladder", term)]))
    [[forced]] = translator.translate([SOURCES[0]], options, target_token=token)
    assert term.lower() in forced.text.lower()
