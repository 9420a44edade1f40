import json

import pytest
import safetensors.torch
import torch

from aiayn.cli import main
from aiayn.store import ModelLoadError, load_model, save_model

from .conftest import random_tokens, tiny_config, tiny_model


def test_save_load_round_trip_gives_identical_outputs(tmp_path):
    model = tiny_model(norm_first=True, positional="learned")
    save_model(model, tiny_config(norm_first=True, positional="learned"), tmp_path / "m")
    loaded, cfg = load_model(tmp_path / "m")
    assert cfg.norm_first and cfg.positional == "learned"
    assert loaded.output.proj.weight is loaded.tgt_embed.tokens.weight  # still tied
    src = random_tokens(2, 6, 37, pad_from=[6, 3])
    tgt = random_tokens(2, 4, 37, seed=1)
    with torch.no_grad():
        assert torch.equal(model(src, tgt), loaded(src, tgt))
    assert sorted(p.name for p in (tmp_path / "m").iterdir()) == [
        "README.md",  # the model card, even when the caller knows nothing more
        "config.json",
        "model.safetensors",
    ]
    card = (tmp_path / "m" / "README.md").read_text()
    assert f"| parameters | {sum(p.numel() for p in model.parameters()):,} |" in card
    assert "pre-norm" in card and "sinusoidal" not in card  # read from this model's config


def test_corrupted_weights_give_a_clear_error(tmp_path):
    save_model(tiny_model(), tiny_config(), tmp_path)
    weights = tmp_path / "model.safetensors"
    weights.write_bytes(weights.read_bytes()[:100])
    with pytest.raises(ModelLoadError, match="corrupted"):
        load_model(tmp_path)


def test_mismatched_config_gives_a_clear_error(tmp_path):
    save_model(tiny_model(), tiny_config(), tmp_path)
    config = json.loads((tmp_path / "config.json").read_text())
    config["model"]["d_ff"] = 128
    (tmp_path / "config.json").write_text(json.dumps(config))
    with pytest.raises(ModelLoadError, match="d_ff is 128, but the weights were saved with 64"):
        load_model(tmp_path)


def test_weights_of_another_shape_name_the_tensor(tmp_path):
    """Weights without a record of their config (an older aiayn, another tool): the first
    tensor whose shape differs is named."""
    model, cfg = tiny_model(), tiny_config()
    save_model(model, cfg, tmp_path)
    safetensors.torch.save_model(model, str(tmp_path / "model.safetensors"))  # no metadata
    config = json.loads((tmp_path / "config.json").read_text())
    del config["weights"]  # nor a checksum, as aiayn 0.1 wrote them
    config["model"]["d_ff"] = 128
    (tmp_path / "config.json").write_text(json.dumps(config))
    with pytest.raises(
        ModelLoadError, match=r"ffn.w_1.bias has shape \[64\], config.json makes it"
    ):
        load_model(tmp_path)


def test_missing_layer_gives_a_clear_error(tmp_path):
    model, cfg = tiny_model(), tiny_config()
    save_model(model, cfg, tmp_path)
    safetensors.torch.save_model(model, str(tmp_path / "model.safetensors"))  # no metadata
    config = json.loads((tmp_path / "config.json").read_text())
    del config["weights"]  # nor a checksum, as aiayn 0.1 wrote them
    config["model"]["n_decoder_layers"] = 3
    (tmp_path / "config.json").write_text(json.dumps(config))
    with pytest.raises(ModelLoadError, match="missing"):
        load_model(tmp_path)


def test_config_with_unknown_key_gives_a_clear_error(tmp_path):
    save_model(tiny_model(), tiny_config(), tmp_path)
    config = json.loads((tmp_path / "config.json").read_text())
    config["model"]["d_modle"] = 64
    (tmp_path / "config.json").write_text(json.dumps(config))
    with pytest.raises(ModelLoadError, match="d_modle"):
        load_model(tmp_path)


def test_missing_directory_gives_a_clear_error(tmp_path):
    with pytest.raises(ModelLoadError, match="not found"):
        load_model(tmp_path / "nope")


def test_info_prints_components_and_total(capsys):
    assert main(["info", "--preset", "base", "--vocab-size", "37000"]) == 0
    out = capsys.readouterr().out
    assert "encoder" in out and "decoder" in out
    assert "63,082,496" in out  # embeddings 18,944,000 + encoder 18,914,304 + decoder 25,224,192


def test_info_reports_a_bad_model_directory_in_one_line(tmp_path, capsys):
    assert main(["info", "--model", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "not found" in err


def test_weights_changed_after_saving_are_refused_by_their_checksum(tmp_path):
    model, cfg = tiny_model(), tiny_config()
    save_model(model, cfg, tmp_path)
    with torch.no_grad():
        next(model.parameters()).view(-1)[0] += 1.0  # the same size, other bytes
    safetensors.torch.save_model(model, str(tmp_path / "model.safetensors"))  # no metadata
    with pytest.raises(ModelLoadError, match=r"model\.safetensors: corrupted"):
        load_model(tmp_path)
