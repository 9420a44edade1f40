import pytest

from aiayn.config import BOS_ID, EOS_ID, PAD_ID, UNK_ID
from aiayn.data import CharTokenizer, TokenizerError, load_tokenizer, train_sentencepiece

from .corpora import sentences


@pytest.mark.parametrize("model_type", ["bpe", "unigram"])
def test_round_trip_and_fixed_special_ids(tmp_path, model_type):
    text = sentences(300)
    tok = train_sentencepiece(text, tmp_path / "m.model", vocab_size=50, model_type=model_type)
    assert tok.pieces([PAD_ID, UNK_ID, BOS_ID, EOS_ID]) == ["<pad>", "<unk>", "<s>", "</s>"]
    for line in text[:50]:
        assert tok.decode(tok.encode([line])[0]) == line
    assert load_tokenizer(tmp_path / "m.model").encode(text[:3]) == tok.encode(text[:3])


def test_subwords_never_cross_spaces(tmp_path):
    text = ["a b c ab bc abc"] * 200
    tok = train_sentencepiece(text, tmp_path / "m.model", vocab_size=12)
    pieces = tok.pieces(tok.encode(["abc a b bc"])[0])
    assert all("▁" not in p[1:] for p in pieces), pieces
    assert tok.decode(tok.encode(["abc a b bc"])[0]) == "abc a b bc"


def test_vocabulary_too_large_is_a_one_line_error(tmp_path):
    with pytest.raises(TokenizerError, match="larger than the data supports") as e:
        train_sentencepiece(sentences(20), tmp_path / "m.model", vocab_size=5000)
    assert "\n" not in str(e.value)


def test_empty_corpus_is_an_error(tmp_path):
    with pytest.raises(TokenizerError):
        train_sentencepiece([], tmp_path / "m.model", vocab_size=50)


def test_char_tokenizer_round_trip_and_unknowns(tmp_path):
    tok = CharTokenizer.train("hello world\n")
    assert tok.vocab_size == 4 + len(set("hello world\n"))
    assert tok.decode(tok.encode(["low\nhold"])[0]) == "low\nhold"
    assert tok.encode(["z"])[0] == [UNK_ID]
    tok.save(tmp_path / "chars.json")
    assert load_tokenizer(tmp_path / "chars.json").encode(["hello"]) == tok.encode(["hello"])
