"""Warnings and messages that keep a user from a useless model or a wrong belief:
`--version`, a run shorter than its warm-up, a vocabulary too large for its corpus, the
pipeline's corpus banner."""

import types

import pytest

import aiayn
from aiayn.cli import main
from aiayn.config import OptimConfig, RunConfig, TrainConfig, training_warnings
from aiayn.data.binarize import TOKENS_PER_PIECE, vocabulary_warning
from aiayn.errors import AiaynError


def test_version(capsys):
    with pytest.raises(SystemExit) as exit_:
        main(["--version"])
    assert exit_.value.code == 0 and capsys.readouterr().out.strip() == f"aiayn {aiayn.__version__}"


@pytest.mark.parametrize(("updates", "warned"), [(300, True), (999, True), (1000, False)])
def test_a_run_shorter_than_its_warm_up_is_warned_about(updates, warned):
    cfg = TrainConfig(optim=OptimConfig(warmup_steps=1000), run=RunConfig(max_updates=updates))
    found = training_warnings(cfg)
    assert bool(found) == warned
    assert not found or ("run.max_updates" in found[0] and "warm-up" in found[0])


@pytest.mark.parametrize(("pairs", "warned"), [(5_000, True), (29_000, False)])
def test_a_vocabulary_too_large_for_the_corpus_is_warned_about(pairs, warned):
    """10,000 pieces on short sentence pairs (13 tokens a side, as Multi30k's)."""
    vocab = {"sizes": {"src": 10_000, "tgt": 10_000}}
    train = types.SimpleNamespace(src_tokens=13 * pairs, tgt_tokens=13 * pairs)
    warning = vocabulary_warning(vocab, train)
    assert (warning is not None) == warned
    assert warning is None or f"fewer than {TOKENS_PER_PIECE}" in warning


def test_the_pipeline_banner_says_where_the_corpus_is(tmp_path, monkeypatch, capsys):
    import aiayn.pipeline

    def stop(*args, **kwargs):
        raise AiaynError("stopped after the banner")

    monkeypatch.setattr(aiayn.pipeline, "run_pipeline", stop)
    recipe = tmp_path / "mine.toml"
    recipe.write_text('[pipeline]\ndataset = "files"\ntrain = "c/train"\nvalid = "c/valid"\n')
    args = ["pipeline", str(recipe), "--work", str(tmp_path / "w"), "--set", "run.max_updates=10"]
    assert main(args) == 2
    err = capsys.readouterr().err
    assert "(corpus: your files;" in err and "download" not in err
    assert "warning: run.max_updates 10 ends before the warm-up" in err
