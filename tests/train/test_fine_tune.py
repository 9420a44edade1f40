"""Fine-tuning (``run.init_from``) from an aiayn model and from an imported Marian model, on
data encoded with the model's own tokenizers (``prepare --vocab-from``)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from aiayn.cli import main
from aiayn.config_io import train_config_from_dict
from aiayn.data import load_prepared
from aiayn.data.tokenizer_files import read_tokenizer_info
from aiayn.store import load_model
from aiayn.train import Trainer
from aiayn.train.init_from import InitFromError

from ..data.corpora import write_lines
from .conftest import Messages, config_dict, tiny_train_config


@pytest.fixture(scope="module")
def base_model(tiny_dataset, tmp_path_factory):
    """A tiny model trained for a few updates: the model to fine-tune."""
    run = tmp_path_factory.mktemp("base") / "run"
    Trainer(tiny_train_config(tiny_dataset, run, run={"max_updates": 6})).train()
    return run / "best"


def _in_domain(root, n: int = 80) -> dict[str, str]:
    """Sentences of the base corpus's words in a fixed order: another domain, same vocabulary."""
    words = ["the", "dog", "runs", "under", "a", "big", "tree", "."]
    src = [" ".join(words[i % 3 : i % 3 + 3 + i % 5]) for i in range(n)]
    tgt = [" ".join(reversed(s.split())) for s in src]
    root.mkdir(parents=True, exist_ok=True)
    for split, rows in (("train", slice(0, n - 20)), ("valid", slice(n - 20, n))):
        write_lines(root / f"{split}.src", src[rows])
        write_lines(root / f"{split}.tgt", tgt[rows])
    return {"train": str(root / "train"), "valid": str(root / "valid")}


def _lines(path: str) -> list[str]:
    return Path(path).read_text().splitlines()


def _prepare_from(model, corpus, out, langs=("src", "tgt")) -> None:
    argv = ["prepare", "--src-lang", langs[0], "--tgt-lang", langs[1], "--workers", "1"]
    argv += ["--train", corpus["train"], "--valid", corpus["valid"], "--out", str(out)]
    assert main([*argv, "--vocab-from", str(model)]) == 0


def test_prepare_with_a_models_vocabulary_copies_its_tokenizer(base_model, tiny_dataset, tmp_path):
    tiny = load_prepared(tiny_dataset)
    _prepare_from(base_model, _in_domain(tmp_path / "corpus"), tmp_path / "data")
    data = load_prepared(tmp_path / "data")
    model_info = read_tokenizer_info(base_model)
    assert read_tokenizer_info(tmp_path / "data").sha256 == model_info.sha256
    assert data.manifest["vocab"]["sizes"] == {"src": 60, "tgt": 60}
    text = "the dog runs under a big tree ."
    assert data.src_tokenizer.encode([text]) == tiny.src_tokenizer.encode([text])
    ids = data.split("train").src[0].tolist()
    assert data.src_tokenizer.decode(ids) == "the dog runs"


def test_fine_tuning_starts_from_the_models_weights_with_a_fresh_optimiser(base_model, tmp_path):
    _prepare_from(base_model, _in_domain(tmp_path / "corpus"), tmp_path / "data")
    values = config_dict(tmp_path / "data", tmp_path / "ft", run={"init_from": str(base_model)})
    del values["model"]  # the architecture comes from the model
    values["model"] = {"dropout": 0.0}  # regularisation may differ
    cfg = train_config_from_dict(values)
    messages = Messages()
    trainer = Trainer(cfg, reporter=messages)
    start = load_model(base_model)[0].state_dict()
    for name, tensor in trainer.model.state_dict().items():
        assert torch.equal(tensor, start[name]), name
    assert not trainer.optimizer.state  # fresh: no moments carried over
    first = trainer.validate()
    state = trainer.train()
    assert state.update == 12  # the schedule counts from 0
    tuned = load_model(tmp_path / "ft" / "best")[0].state_dict()
    assert not torch.equal(tuned["output.proj.weight"], start["output.proj.weight"])
    rows = [json.loads(line) for line in (tmp_path / "ft" / "metrics.jsonl").open()]
    last = [r for r in rows if r["kind"] == "valid"][-1]
    assert last["nll"] < first["nll"]
    [scored] = [m for m in messages if m.endswith("(the starting model, before fine-tuning)")]
    assert scored.startswith(f"valid       0 | loss {first['loss']:.3f} | nll {first['nll']:.3f}")
    assert read_tokenizer_info(tmp_path / "ft" / "best").sha256 == (
        read_tokenizer_info(base_model).sha256
    )


def test_a_config_that_disagrees_with_the_model_is_refused_naming_the_field(
    base_model, tiny_dataset, tmp_path
):
    values = config_dict(tiny_dataset, tmp_path / "a", run={"init_from": str(base_model)})
    values["model"] = {"d_ff": 128}
    with pytest.raises(InitFromError, match=r"model\.d_ff is 64"):
        Trainer(train_config_from_dict(values))


def _tiny_marian(root, texts: list[str]):
    """A random MarianMTModel with opus-mt's tokenizer files, saved as Hugging Face does."""
    transformers = pytest.importorskip("transformers", reason="transformers is a dev dependency")
    import sentencepiece as spm

    from aiayn.data import train_sentencepiece

    root.mkdir(parents=True)
    train_sentencepiece(texts, root / "source.spm", vocab_size=60)
    train_sentencepiece(texts, root / "target.spm", vocab_size=60)
    sp = spm.SentencePieceProcessor(model_file=str(root / "source.spm"))
    pieces = [sp.id_to_piece(i) for i in range(4, sp.get_piece_size())]
    tokens = ["</s>", "<unk>", *dict.fromkeys(pieces), "<pad>"]
    (root / "vocab.json").write_text(json.dumps({t: i for i, t in enumerate(tokens)}))
    (root / "tokenizer_config.json").write_text(
        json.dumps({"source_lang": "src", "target_lang": "tgt"})
    )
    v = len(tokens)
    config = transformers.MarianConfig(
        vocab_size=v,
        d_model=16,
        encoder_layers=1,
        decoder_layers=1,
        encoder_attention_heads=2,
        decoder_attention_heads=2,
        encoder_ffn_dim=32,
        decoder_ffn_dim=32,
        pad_token_id=v - 1,
        eos_token_id=0,
        decoder_start_token_id=v - 1,
        max_position_embeddings=64,
        scale_embedding=True,
    )
    torch.manual_seed(0)
    model = transformers.MarianMTModel(config)
    with torch.no_grad():
        model.final_logits_bias.normal_(0.0, 1.0)
    model.save_pretrained(root)
    (root / "README.md").write_text("---\nlanguage: [en, de]\nlicense: cc-by-4.0\n---\n# tiny\n")
    tokenizer = transformers.MarianTokenizer(
        str(root / "source.spm"), str(root / "target.spm"), str(root / "vocab.json")
    )
    return model.eval(), tokenizer


def test_fine_tuning_an_imported_marian_model(tmp_path):
    """Batches framed as Marian's (source + EOS 0, decoder from PAD, padding V-1): the first
    validation loss equals Hugging Face's loss on the same pairs; a few updates lower it."""
    corpus = _in_domain(tmp_path / "corpus")
    texts = [line for name in ("train", "valid") for line in _lines(f"{corpus[name]}.src")]
    hf, hf_tokenizer = _tiny_marian(tmp_path / "hf", texts)
    assert main(["import", "marian", str(tmp_path / "hf"), "--out", str(tmp_path / "m")]) == 0
    _prepare_from(tmp_path / "m", corpus, tmp_path / "data")
    values = config_dict(tmp_path / "data", tmp_path / "ft", run={"init_from": str(tmp_path / "m")})
    values["model"] = {"dropout": 0.0}
    values["optim"] = {"label_smoothing": 0.0, "schedule": "constant", "lr": 0.003}
    trainer = Trainer(train_config_from_dict(values))
    before = trainer.validate()

    sources, targets = _lines(f"{corpus['valid']}.src"), _lines(f"{corpus['valid']}.tgt")
    batch = hf_tokenizer(sources, text_target=targets, padding=True, return_tensors="pt")
    batch["labels"] = batch["labels"].masked_fill(batch["labels"] == hf.config.pad_token_id, -100)
    with torch.no_grad():
        theirs = hf(**batch).loss  # mean over the target tokens, EOS included
    assert before["nll"] == pytest.approx(float(theirs), rel=1e-4)

    card = (tmp_path / "m" / "README.md").read_text()
    assert f"Imported from the Hugging Face Marian (opus-mt) model in `{tmp_path / 'hf'}`" in card
    assert "## Licence\n\ncc-by-4.0 (as the original model's card states)" in card
    assert f"| parameters | {sum(p.numel() for p in trainer.model.parameters()):,} |" in card

    trainer.train()
    card = (tmp_path / "ft" / "best" / "README.md").read_text()
    assert f"Fine-tuned from the model in `{tmp_path / 'm'}`" in card
    rows = [json.loads(line) for line in (tmp_path / "ft" / "metrics.jsonl").open()]
    assert [r for r in rows if r["kind"] == "valid"][-1]["nll"] < before["nll"]
    assert (
        main(
            ["translate", "--model", str(tmp_path / "ft" / "best"), "-i", corpus["valid"] + ".src"]
        )
        == 0
    )
