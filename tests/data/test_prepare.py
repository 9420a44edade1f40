import json

import numpy as np
import pytest

from aiayn.cli import main
from aiayn.config import PrepareConfig
from aiayn.data import CorpusError, TokenizerError, binarize, encode, load_prepared, prepare
from aiayn.files import DestinationError

from .corpora import make_corpus, sentences, write_lines


def _cfg(paths, **overrides):
    fields = dict(
        src_lang="src",
        tgt_lang="tgt",
        train=paths["train"],
        valid=paths["valid"],
        test=(paths["test"],),
        vocab_size=60,
    )
    fields.update(overrides)
    return PrepareConfig(**fields)


@pytest.mark.parametrize("gz", [False, True])
def test_prepare_writes_splits_vocab_and_manifest(tmp_path, gz):
    paths = make_corpus(tmp_path / "corpus", gz=gz)
    manifest = prepare(_cfg(paths), tmp_path / "data")
    assert set(manifest["splits"]) == {"train", "valid", "test"}
    assert manifest["splits"]["train"]["pairs"] == 400
    assert manifest["vocab"]["joint"] and manifest["vocab"]["sizes"]["src"] == 60
    assert manifest["options"]["vocab_size"] == 60
    data = load_prepared(tmp_path / "data")
    data.verify()
    test = data.split("test")
    src_lines = (tmp_path / "corpus" / "test.src").read_text().splitlines() if not gz else None
    if src_lines:
        decoded = [data.src_tokenizer.decode(test.src[i].tolist()) for i in range(len(test))]
        assert decoded == src_lines
    assert test.src.lengths.dtype == np.uint16  # only lengths are held; sentences are read
    tokens = manifest["splits"]["train"]["src_tokens"]
    assert int(data.split("train").src.lengths.sum()) == tokens


def test_separate_vocabularies(tmp_path):
    paths = make_corpus(tmp_path / "corpus")
    manifest = prepare(_cfg(paths, joint_vocab=False), tmp_path / "data")
    assert manifest["vocab"]["files"] == {"src": "spm.src.model", "tgt": "spm.tgt.model"}
    data = load_prepared(tmp_path / "data")
    assert data.src_tokenizer is not data.tgt_tokenizer


def test_length_filters_drop_and_count(tmp_path):
    root = tmp_path / "corpus"
    root.mkdir()
    short = sentences(50, min_len=2, max_len=4)
    write_lines(root / "train.src", [*short, " ".join(["dog"] * 40), "a b c d e f g h i j"])
    write_lines(root / "train.tgt", [*short, "dog", "a"])
    for split in ("valid", "test"):
        write_lines(root / f"{split}.src", short[:5])
        write_lines(root / f"{split}.tgt", short[:5])
    paths = {k: str(root / k) for k in ("train", "valid", "test")}
    manifest = prepare(_cfg(paths, vocab_size=40, max_len=20, max_len_ratio=5.0), tmp_path / "d")
    train = manifest["splits"]["train"]
    assert (train["pairs"], train["dropped_too_long"], train["dropped_ratio"]) == (50, 1, 1)


def test_interrupted_prepare_leaves_nothing_that_looks_complete(tmp_path, monkeypatch):
    paths = make_corpus(tmp_path / "corpus")

    def crash(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(binarize, "_manifest", crash)
    with pytest.raises(KeyboardInterrupt):
        prepare(_cfg(paths), tmp_path / "data")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["corpus"]


def test_existing_output_is_kept_unless_overwrite(tmp_path):
    paths = make_corpus(tmp_path / "corpus")
    prepare(_cfg(paths), tmp_path / "data")
    with pytest.raises(DestinationError, match="--overwrite"):
        prepare(_cfg(paths), tmp_path / "data")
    prepare(_cfg(paths, vocab_size=50), tmp_path / "data", overwrite=True)
    manifest = json.loads((tmp_path / "data" / "manifest.json").read_text())
    assert manifest["vocab"]["sizes"]["src"] == 50


def test_overwrite_never_replaces_what_aiayn_did_not_write(tmp_path):
    paths = make_corpus(tmp_path / "corpus")
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "keep.txt").write_text("precious")
    with pytest.raises(DestinationError, match="not a dataset aiayn wrote"):
        prepare(_cfg(paths), mine, overwrite=True)
    assert (mine / "keep.txt").read_text() == "precious"


def test_empty_corpus_is_an_error(tmp_path):
    root = tmp_path / "corpus"
    root.mkdir()
    for split in ("train", "valid", "test"):
        write_lines(root / f"{split}.src", [])
        write_lines(root / f"{split}.tgt", [])
    paths = {k: str(root / k) for k in ("train", "valid", "test")}
    with pytest.raises((CorpusError, TokenizerError), match="empty"):
        prepare(_cfg(paths), tmp_path / "data")


def test_cli_errors_are_one_line(tmp_path, capsys):
    paths = make_corpus(tmp_path / "corpus")
    (tmp_path / "corpus" / "train.tgt").write_text("only one line\n")
    base = [
        "prepare",
        "--src-lang",
        "src",
        "--tgt-lang",
        "tgt",
        "--train",
        paths["train"],
        "--valid",
        paths["valid"],
        "--out",
        str(tmp_path / "out"),
        "--vocab-size",
        "30",
    ]
    assert main(base) == 2
    err = capsys.readouterr().err
    assert err.splitlines()[-1].startswith("aiayn prepare: error: line counts differ")
    assert "Traceback" not in err
    assert main([*base[:-2], "--vocab-size", "100000", "--train", paths["valid"]]) == 2
    assert "larger than the data supports" in capsys.readouterr().err
    assert main(["prepare", "--out", str(tmp_path / "o")]) == 2
    assert "--src-lang" in capsys.readouterr().err
    assert not (tmp_path / "out").exists()


def test_multi30k_pretokenized_round_trip(tmp_path, multi30k_dir):
    tok = multi30k_dir / "tok"
    cfg = PrepareConfig(
        src_lang="en",
        tgt_lang="de",
        train=str(tok / "train.lc.norm.tok"),
        valid=str(tok / "val.lc.norm.tok"),
        test=(str(tok / "test_2016_flickr.lc.norm.tok"),),
        pretokenized=True,
    )
    manifest = prepare(cfg, tmp_path / "m30k")
    assert manifest["splits"]["train"]["pairs"] == 29000
    data = load_prepared(tmp_path / "m30k")
    test = data.split("test_2016_flickr")
    from aiayn.data.corpus import read_lines

    references = list(read_lines(tok / "test_2016_flickr.lc.norm.tok.de.gz"))
    decoded = [data.tgt_tokenizer.decode(test.tgt[i].tolist()) for i in range(len(test))]
    assert decoded == references


def test_multi30k_raw_round_trip(tmp_path, multi30k_dir):
    cfg = PrepareConfig(
        src_lang="en",
        tgt_lang="fr",
        train=str(multi30k_dir / "train"),
        valid=str(multi30k_dir / "val"),
        vocab_size=8000,
    )
    prepare(cfg, tmp_path / "raw")
    data = load_prepared(tmp_path / "raw")
    from aiayn.data.corpus import read_lines

    valid = data.split("valid")
    references = list(read_lines(multi30k_dir / "val.fr.gz"))
    decoded = [data.tgt_tokenizer.decode(valid.tgt[i].tolist()) for i in range(len(valid))]
    assert decoded == [" ".join(r.split()) for r in references]


@pytest.fixture
def small_chunks(monkeypatch):
    """Chunks of 40 pairs, workers from the second chunk: the paths a WMT-sized corpus takes."""
    monkeypatch.setattr(encode, "CHUNK", 40)
    monkeypatch.setattr(encode, "POOL_FROM_CHUNK", 1)


def _all_pairs(directory, split):
    data = load_prepared(directory).split(split)
    return [(data.src[i].tolist(), data.tgt[i].tolist()) for i in range(len(data))]


def test_workers_and_shards_give_the_same_dataset(tmp_path, small_chunks):
    paths = make_corpus(tmp_path / "corpus", train=500, gz=True)
    one = prepare(_cfg(paths), tmp_path / "one", workers=1)
    many = prepare(_cfg(paths, shard_size=150), tmp_path / "many", workers=2)
    assert many["splits"]["train"]["shards"] == [f"train.{k:05d}" for k in range(4)]
    assert one["splits"]["train"]["shards"] == ["train"]
    for key in ("pairs", "src_tokens", "tgt_tokens", "dropped_too_long", "dropped_ratio"):
        assert many["splits"]["train"][key] == one["splits"]["train"][key]
    assert _all_pairs(tmp_path / "many", "train") == _all_pairs(tmp_path / "one", "train")
    assert (tmp_path / "many" / "train.00003.src.bin").is_file()
    load_prepared(tmp_path / "many").verify()


def test_mismatched_line_counts_are_named_even_with_workers(tmp_path, small_chunks):
    root = tmp_path / "corpus"
    root.mkdir()
    lines = sentences(300)
    write_lines(root / "train.src", lines)
    write_lines(root / "train.tgt", lines[:-1])
    for split in ("valid", "test"):
        write_lines(root / f"{split}.src", lines[:5])
        write_lines(root / f"{split}.tgt", lines[:5])
    paths = {k: str(root / k) for k in ("train", "valid", "test")}
    with pytest.raises(CorpusError, match=r"train.src has 300 lines, .*train.tgt has 299"):
        prepare(_cfg(paths), tmp_path / "d", workers=2)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["corpus"]
