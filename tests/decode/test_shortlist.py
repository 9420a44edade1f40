"""The vocabulary shortlist: the lexical table, the restricted steps, and translating with it."""

import dataclasses
import shutil

import numpy as np
import pytest
import torch

from aiayn.accel.shortlist import Shortlist, ShortlistStepper
from aiayn.cli import main
from aiayn.data import lexicon
from aiayn.data.lexicon import lexical_table
from aiayn.decode import beam_search, greedy_search, stepper_for
from aiayn.decode.specials import DEFAULT_SPECIALS
from aiayn.errors import ConfigError
from aiayn.translate.shortlist_table import (
    SHORTLIST_FILE,
    ShortlistError,
    load_shortlist,
    write_shortlist,
)
from aiayn.translate.translator import SearchOptions, TranslationError, Translator

from ..conftest import tiny_model

pytestmark = pytest.mark.isa  # also run held to AVX2: tests/test_held_isa.py


PAIRS = [([4, 5], [7, 8]), ([4, 6], [7, 9]), ([5, 6], [8, 9]), ([4], [7]), ([6, 6], [9, 9])]


def test_the_table_ranks_each_source_piece_s_translations_and_the_frequent_pieces():
    table = lexical_table(PAIRS, src_vocab=10, tgt_vocab=12, best=2, frequent=2)
    assert table.best[4, 0] == 7 and table.best[5, 0] == 8 and table.best[6, 0] == 9
    assert (table.best[:4] == -1).all()  # never seen: nothing to allow
    assert table.frequent.tolist() == [9, 7]  # 9 three times, 7 and 8 twice: 7 by id


def test_the_table_is_the_same_read_in_chunks(monkeypatch):
    whole = lexical_table(PAIRS, src_vocab=10, tgt_vocab=12, best=3, frequent=5)
    monkeypatch.setattr(lexicon, "CHUNK", 2)
    chunked = lexical_table(PAIRS, src_vocab=10, tgt_vocab=12, best=3, frequent=5)
    assert np.array_equal(whole.best, chunked.best)


@pytest.fixture(scope="module")
def models() -> dict:
    """A random tiny model, built with each profile (the same weights)."""
    return {p: tiny_model(profile=p) for p in ("fast", "reference")}


def _sources() -> torch.Tensor:
    g = torch.Generator().manual_seed(0)
    src = torch.randint(4, 37, (5, 8), generator=g)
    src[:, -1] = DEFAULT_SPECIALS.eos
    src[1, 4:] = DEFAULT_SPECIALS.pad
    src[1, 3] = DEFAULT_SPECIALS.eos
    return src


@pytest.mark.parametrize(
    ("profile", "precision"), [("fast", "fp32"), ("fast", "int8"), ("reference", "fp32")]
)
def test_the_whole_vocabulary_as_shortlist_decodes_the_same(models, profile, precision):
    model, src = models[profile], _sources()
    vocab = model.output.weight.size(0)

    def decoders():
        inner = stepper_for(model, precision=precision)
        return inner, ShortlistStepper(
            stepper_for(model, precision=precision), torch.arange(vocab), vocab
        )

    plain, listed = decoders()
    assert torch.equal(greedy_search(plain, src), greedy_search(listed, src))
    plain, listed = decoders()
    ext = model.profile.extensions
    a = beam_search(plain, src, beam=3, nbest=3, extensions=ext)
    b = beam_search(listed, src, beam=3, nbest=3, extensions=ext)
    for x, y in zip(a, b, strict=True):
        assert [h.tokens for h in x] == [h.tokens for h in y]
        assert [h.score for h in x] == pytest.approx([h.score for h in y], abs=1e-4)


@pytest.mark.parametrize(
    ("profile", "precision"), [("fast", "fp32"), ("fast", "int8"), ("reference", "fp32")]
)
def test_a_shortlist_changes_only_the_support_of_the_scores(models, profile, precision):
    model, src = models[profile], _sources()
    vocab = model.output.weight.size(0)
    rows = torch.tensor([0, 2, 3, 5, 6, 9, 11])
    plain = stepper_for(model, precision=precision)
    listed = ShortlistStepper(stepper_for(model, precision=precision), rows, vocab)
    tokens = torch.full((src.size(0), 1), DEFAULT_SPECIALS.bos)
    with torch.inference_mode():
        for normalize in (False, True):
            full, _ = plain.step(tokens, plain.start(src), normalize=False)  # (B, V)
            some, _ = listed.step(tokens, listed.start(src), normalize=normalize)  # (B, V)
            kept = full[:, rows]
            expected = kept.log_softmax(dim=-1) if normalize else kept
            torch.testing.assert_close(some[:, rows], expected, atol=1e-4, rtol=1e-4)
            outside = torch.ones(vocab, dtype=torch.bool)
            outside[rows] = False
            assert torch.isneginf(some[:, outside]).all()


def test_a_batch_s_rows_are_its_sources_best_the_frequent_and_the_specials():
    best = torch.full((20, 3), -1)
    best[7] = torch.tensor([12, 13, 14])
    best[8] = torch.tensor([15, -1, -1])
    table = Shortlist(best, torch.tensor([10, 11]))
    src = torch.tensor([[7, 8, 3], [8, 3, 0]])
    rows = table.rows(src, 2, DEFAULT_SPECIALS, extra=[19])
    assert rows.tolist() == [0, 1, 2, 3, 10, 11, 12, 13, 15, 19]


@pytest.fixture(scope="module")
def listed_model(trained_model_dir, tiny_dataset, tmp_path_factory):
    """The trained tiny model with a shortlist table built from its training corpus (once
    per module: no test writes to it)."""
    model = tmp_path_factory.mktemp("listed") / "model"
    shutil.copytree(trained_model_dir, model)
    corpus = tiny_dataset.parent / "corpus"
    args = ["--source", str(corpus / "train.src"), "--target", str(corpus / "train.tgt")]
    assert main(["shortlist", str(model), *args, "--best", "8", "--frequent", "20"]) == 0
    return model


def test_translating_with_a_shortlist_gives_the_model_s_translations(listed_model, tiny_dataset):
    """Greedy search with the shortlist gives the full vocabulary's translation wherever that
    uses only listed pieces (renormalising over the listed rows keeps each step's argmax), in
    fp32 and int8; beam search writes listed pieces only (it may choose otherwise: the
    renormalisation lifts longer hypotheses more)."""
    translator = Translator.from_dir(listed_model)
    assert translator.shortlist is not None and translator.shortlist.per_source == 8
    lines = (tiny_dataset.parent / "corpus" / "test.src").read_text().splitlines()[:12]
    for beam, precision in ((1, "fp32"), (1, "int8"), (4, "fp32"), (4, "int8")):
        compared = 0
        for ids in translator.src_tokenizer.encode(lines):
            rows = translator.shortlist.rows(torch.tensor([ids]), 8, translator.model.specials)
            options = SearchOptions(beam=beam, precision=precision)
            (full,) = translator.translate_ids([ids], options)
            (listed,) = translator.translate_ids([ids], dataclasses.replace(options, shortlist=8))
            assert set(listed[0].tokens) <= set(rows.tolist())
            if beam == 1 and set(full[0].tokens) <= set(rows.tolist()):
                compared += 1
                assert listed[0].tokens == full[0].tokens, (precision, ids)
        assert beam > 1 or compared >= 3, precision  # the comparison compares something


def test_bad_shortlists_are_refused_in_one_line(listed_model, trained_model_dir, tmp_path, capsys):
    with pytest.raises(ConfigError, match=r"SearchOptions\.shortlist"):
        SearchOptions(shortlist=-1)
    with pytest.raises(TranslationError, match="no shortlist table"):
        Translator.from_dir(trained_model_dir).translate(["a b"], SearchOptions(shortlist=4))
    translator = Translator.from_dir(listed_model)
    with pytest.raises(TranslationError, match="at most 8 target pieces"):
        translator.translate(["a b"], SearchOptions(shortlist=9))
    with pytest.raises(TranslationError, match="frequent pieces"):
        translator.translate(["a b"], SearchOptions(shortlist=4, beam=11))
    (tmp_path / "in.txt").write_text("a b\n")
    args = ["translate", "--model", str(listed_model), "-i", str(tmp_path / "in.txt")]
    assert main([*args, "--shortlist", "9"]) == 2
    with pytest.raises(SystemExit) as refused:
        main([*args, "--shortlist", "-2"])
    assert refused.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 2 and all("shortlist" in line for line in err)


def test_a_table_of_other_vocabularies_is_refused(listed_model, tmp_path):
    model = tmp_path / "model"  # a copy: the module's listed model stays as it is
    shutil.copytree(listed_model, model)
    write_shortlist(model, np.zeros((3, 2), dtype=np.int32), np.zeros(2, dtype=np.int32))
    with pytest.raises(ShortlistError, match="other vocabularies"):
        Translator.from_dir(model)
    (model / SHORTLIST_FILE).write_bytes(b"not safetensors")
    with pytest.raises(ShortlistError, match="not a shortlist table"):
        load_shortlist(model, 3, 3)


def test_a_corpus_of_unequal_sides_is_refused(trained_model_dir, tmp_path, capsys):
    model = tmp_path / "model"
    shutil.copytree(trained_model_dir, model)
    (tmp_path / "a").write_text("x y\nz\n")
    (tmp_path / "b").write_text("y x\n")
    args = [
        "shortlist",
        str(model),
        "--source",
        str(tmp_path / "a"),
        "--target",
        str(tmp_path / "b"),
    ]
    assert main(args) == 2
    assert "as many on both sides" in capsys.readouterr().err
    assert not (model / SHORTLIST_FILE).exists()


@pytest.mark.parametrize(("precision", "shortlist"), [("fp32", 0), ("fp32", 8)])
@pytest.mark.parametrize("beam", [1, 4])
def test_a_sentence_translates_the_same_alone_and_in_any_batch(
    listed_model, tiny_dataset, precision, shortlist, beam
):
    """With and without a shortlist, a sentence's translation and score do not depend on the
    sentences decoded beside it (another client's request, on a server): a shortlist gives
    each sentence its own rows. (int8 still quantises a call's activations by one scale.)"""
    translator = Translator.from_dir(listed_model)
    lines = (tiny_dataset.parent / "corpus" / "test.src").read_text().splitlines()[:12]
    options = SearchOptions(beam=beam, precision=precision, shortlist=shortlist, text="raw")
    alone = [translator.translate([line], options)[0][0] for line in lines]
    together = [hyps[0] for hyps in translator.translate(lines, options)]
    reversed_ = [hyps[0] for hyps in translator.translate(lines[::-1], options)][::-1]
    for one, many, other in zip(alone, together, reversed_, strict=True):
        assert one.tokens == many.tokens == other.tokens
        assert one.score == pytest.approx(many.score, abs=1e-5)
