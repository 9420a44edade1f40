import torch

from aiayn.cli import main
from aiayn.data.blocks import random_blocks, sequential_blocks
from aiayn.data.lm_stream import load_lm_data, prepare_lm

TEXT = "To be, or not to be, that is the question:\nWhether 'tis nobler in the mind to suffer\n"


def test_char_corpus_round_trip_and_split(tmp_path):
    (tmp_path / "t.txt").write_text(TEXT * 20)
    manifest = prepare_lm(tmp_path / "t.txt", tmp_path / "lm", valid_fraction=0.1)
    data = load_lm_data(tmp_path / "lm")
    train, valid = data.stream("train"), data.stream("valid")
    assert manifest["characters"]["train"] == int(len(TEXT * 20) * 0.9)
    assert data.tokenizer.decode(train.tolist()) + data.tokenizer.decode(valid.tolist()) == (
        TEXT * 20
    )


def test_blocks_are_contiguous_and_shifted(tmp_path):
    (tmp_path / "t.txt").write_text(TEXT * 20)
    prepare_lm(tmp_path / "t.txt", tmp_path / "lm")
    stream = load_lm_data(tmp_path / "lm").stream("train")
    x, y = random_blocks(stream, block_size=16, batch_size=4, generator=torch.Generator())
    assert x.shape == y.shape == (4, 16)
    assert torch.equal(x[:, 1:], y[:, :-1])
    blocks = list(sequential_blocks(stream, block_size=16, batch_size=5))
    covered = torch.cat([b[0] for b in blocks]).flatten()
    assert torch.equal(covered, torch.from_numpy(stream[: covered.numel()].astype("int64")))


def test_sentencepiece_lm_corpus(tmp_path):
    (tmp_path / "t.txt").write_text(TEXT * 50)
    prepare_lm(tmp_path / "t.txt", tmp_path / "lm", tokenizer="sentencepiece", vocab_size=40)
    data = load_lm_data(tmp_path / "lm")
    assert data.manifest["vocab_size"] == 40
    assert data.tokenizer.decode(data.stream("valid")[:5].tolist())


def test_cli_prepares_shakespeare(tmp_path, shakespeare_file, capsys):
    assert main(["prepare", "--text", str(shakespeare_file), "--out", str(tmp_path / "s")]) == 0
    data = load_lm_data(tmp_path / "s")
    assert data.tokenizer.vocab_size == 65 + 4  # nanoGPT's 65 characters + aiayn's specials
    assert data.manifest["characters"]["train"] == 1_003_854  # first 90% of 1,115,394
