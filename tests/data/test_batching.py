import numpy as np
import pytest

from aiayn.config import BOS_ID, EOS_ID, PAD_ID, PrepareConfig
from aiayn.data import BatchIterator, TokenBatchSampler, collate, load_prepared, prepare

from .corpora import make_corpus


@pytest.fixture(scope="module")
def train_split(tmp_path_factory):
    root = tmp_path_factory.mktemp("batching")
    paths = make_corpus(root / "corpus", train=2000)
    cfg = PrepareConfig(
        src_lang="src", tgt_lang="tgt", train=paths["train"], valid=paths["valid"], vocab_size=50
    )
    prepare(cfg, root / "data")
    return load_prepared(root / "data").split("train")


def _sampler(split, **kw):
    kw.setdefault("max_tokens", 300)
    return TokenBatchSampler(split.src.lengths, split.tgt.lengths, **kw)


def test_every_sentence_exactly_once_per_epoch(train_split):
    for epoch in range(3):
        batches = _sampler(train_split, seed=3).batches(epoch)
        everything = np.sort(np.concatenate(batches))
        assert np.array_equal(everything, np.arange(len(train_split)))


def test_padded_size_never_exceeds_max_tokens(train_split):
    sampler = _sampler(train_split, max_tokens=256, chunk_size=500)
    for indices in sampler.batches(0):
        batch = collate(train_split, indices)
        assert batch.src.numel() <= 256 and batch.tgt_in.numel() <= 256


def test_rounded_widths_count_within_max_tokens(train_split):
    """With ``pad_to_multiple`` the sampler counts the widths ``collate`` rounds up to."""
    sampler = _sampler(train_split, max_tokens=256, chunk_size=500, pad_to_multiple=8)
    for indices in sampler.batches(0):
        batch = collate(train_split, indices, pad_to_multiple=8)
        assert batch.src.numel() <= 256 and batch.tgt_in.numel() <= 256


@pytest.mark.parametrize("bad", [{"max_tokens": 0}, {"pad_to_multiple": 0}])
def test_sampler_refuses_sizes_below_one(train_split, bad):
    with pytest.raises(ValueError, match="must be positive"):
        _sampler(train_split, **bad)


def test_rounded_widths_make_few_batch_sizes(train_split):
    """Counting rounded widths, every batch of one width has the same number of sentences
    but the last of that width (cut short by a wider sentence): few tensor shapes."""

    def sizes(multiple: int) -> set[int]:
        sampler = _sampler(train_split, max_tokens=256, pad_to_multiple=multiple)
        return {len(b) for epoch in range(3) for b in sampler.batches(epoch)}

    assert len(sizes(8)) < len(sizes(1)) / 2


def test_same_seed_same_batches_other_epoch_other_batches(train_split):
    a = _sampler(train_split, seed=7).batches(2)
    b = _sampler(train_split, seed=7).batches(2)
    assert all(np.array_equal(x, y) for x, y in zip(a, b, strict=True))
    c = _sampler(train_split, seed=7).batches(3)
    assert not all(np.array_equal(x, y) for x, y in zip(a, c, strict=False))


def test_max_sentences_caps_batch_size(train_split):
    assert max(len(b) for b in _sampler(train_split, max_sentences=5).batches(0)) == 5


def test_batch_layout_source_eos_target_shifted(train_split):
    batch = collate(train_split, np.array([0, 1, 2]))
    for row, i in enumerate([0, 1, 2]):
        src, tgt = train_split.src[i].tolist(), train_split.tgt[i].tolist()
        assert batch.src[row, : len(src) + 1].tolist() == [*src, EOS_ID]
        assert batch.tgt_in[row, : len(tgt) + 1].tolist() == [BOS_ID, *tgt]
        assert batch.tgt_out[row, : len(tgt) + 1].tolist() == [*tgt, EOS_ID]
        assert set(batch.src[row, len(src) + 1 :].tolist()) <= {PAD_ID}
    assert batch.n_tgt_tokens == sum(len(train_split.tgt[i]) + 1 for i in range(3))


def test_resumed_iterator_continues_where_it_stopped(train_split):
    sampler = _sampler(train_split, seed=1)
    straight = BatchIterator(train_split, sampler)
    per_epoch = straight.batches_per_epoch()
    expected = [next(straight).indices for _ in range(per_epoch + 5)]
    first = BatchIterator(train_split, sampler)
    for _ in range(per_epoch - 2):
        next(first)
    resumed = BatchIterator(train_split, sampler)
    resumed.load_state_dict(first.state_dict())
    rest = [next(resumed).indices for _ in range(7)]
    assert all(np.array_equal(x, y) for x, y in zip(rest, expected[per_epoch - 2 :], strict=True))
    assert resumed.epoch == 1


def test_shards_are_disjoint_and_equally_long(train_split):
    sampler = _sampler(train_split, seed=4)
    shards = [BatchIterator(train_split, sampler, num_shards=3, shard=k) for k in range(3)]
    counts = {s.batches_per_epoch() for s in shards}
    assert len(counts) == 1
    n = counts.pop()
    seen = np.concatenate([np.concatenate([next(s).indices for _ in range(n)]) for s in shards])
    assert len(seen) == len(np.unique(seen))
    assert n == len(sampler.batches(0)) // 3


def test_multi30k_padding_under_five_percent(tmp_path, multi30k_dir):
    tok = multi30k_dir / "tok"
    cfg = PrepareConfig(
        src_lang="en",
        tgt_lang="de",
        train=str(tok / "train.lc.norm.tok"),
        valid=str(tok / "val.lc.norm.tok"),
        pretokenized=True,
    )
    prepare(cfg, tmp_path / "m30k")
    train = load_prepared(tmp_path / "m30k").split("train")
    sampler = TokenBatchSampler(train.src.lengths, train.tgt.lengths, max_tokens=4096, seed=1)
    assert sampler.padding_fraction() < 0.05
    for indices in sampler.batches(0):
        batch = collate(train, indices)
        assert max(batch.src.numel(), batch.tgt_in.numel()) <= 4096


@pytest.mark.parametrize("chunk_size", [1, 7, 500, 1999, 2000, 4096])
def test_every_sentence_exactly_once_with_several_chunks(train_split, chunk_size):
    """A corpus of several sampler chunks (WMT is ~35 chunks of the default size) is still
    covered exactly once per epoch, shuffled or not."""
    for shuffle in (True, False):
        sampler = _sampler(train_split, seed=5, chunk_size=chunk_size, shuffle=shuffle)
        for epoch in range(2):
            everything = np.sort(np.concatenate(sampler.batches(epoch)))
            assert np.array_equal(everything, np.arange(len(train_split)))
