import pytest

from aiayn.config import ModelConfig, model_preset
from aiayn.config_io import config_from_dict, config_to_dict, load_toml
from aiayn.errors import ConfigError


def test_presets_have_the_paper_sizes():
    base = model_preset("base")
    assert (base.n_encoder_layers, base.d_model, base.d_ff, base.n_heads) == (6, 512, 2048, 8)
    big = model_preset("big")
    assert (big.d_model, big.d_ff, big.n_heads, big.dropout) == (1024, 4096, 16, 0.3)
    tiny = model_preset("tiny")
    assert (tiny.n_encoder_layers, tiny.d_model, tiny.d_ff, tiny.n_heads) == (4, 128, 256, 4)
    assert base.d_head == 64  # d_k = d_v = d_model / h


def test_unknown_preset_is_rejected():
    with pytest.raises(ValueError, match="unknown preset"):
        model_preset("huge")


def test_config_is_frozen():
    cfg = model_preset("tiny")
    with pytest.raises(AttributeError):
        cfg.d_model = 3  # type: ignore[misc]


def test_heads_must_divide_d_model():
    with pytest.raises(ValueError, match="divisible"):
        ModelConfig(d_model=100, n_heads=8)


def test_shared_embeddings_need_one_vocabulary():
    with pytest.raises(ValueError, match="share_embeddings"):
        ModelConfig(src_vocab_size=10, tgt_vocab_size=12)


def test_dict_round_trip():
    cfg = model_preset("tiny").with_vocab(100)
    assert config_from_dict(ModelConfig, config_to_dict(cfg)) == cfg


@pytest.mark.parametrize(
    ("values", "message"),
    [
        ({"d_modle": 5}, "unknown key"),
        ({"d_model": "big"}, "expected int"),
        ({"d_model": True}, "boolean"),
        ({"activation": "tanh"}, "not one of"),
        ({"dropout": 1.5}, "dropout"),
    ],
)
def test_bad_values_are_clear_errors(values, message):
    with pytest.raises(ConfigError, match=message):
        config_from_dict(ModelConfig, values, where="model")


def test_int_is_accepted_for_float():
    assert config_from_dict(ModelConfig, {"dropout": 0}).dropout == 0.0


def test_extends_overrides_the_parent_key_by_key(tmp_path):
    (tmp_path / "base.toml").write_text(
        '[pipeline]\nsrc_lang = "en"\ntgt_lang = "de"\n[model]\npreset = "tiny"\n'
    )
    (tmp_path / "child.toml").write_text('extends = "base.toml"\n[pipeline]\ntgt_lang = "fr"\n')
    values = load_toml(str(tmp_path / "child.toml"))
    assert values == {"pipeline": {"src_lang": "en", "tgt_lang": "fr"}, "model": {"preset": "tiny"}}


@pytest.mark.parametrize("pair", [("fr", "de"), ("fr", "en")])
def test_the_quick_pivot_recipes_are_the_en_de_quick_recipe_on_another_pair(pair):
    """bench/pivot.py compares models of one recipe: only the languages differ."""
    from dataclasses import replace
    from pathlib import Path

    from aiayn.config_io import recipe_from_dict

    configs = Path(__file__).parents[1] / "configs"
    src, tgt = pair
    path = configs / f"multi30k_{src}_{tgt}_quick.toml"
    recipe = recipe_from_dict(load_toml(str(path)), where=str(path))
    quick = configs / "multi30k_en_de_quick.toml"
    en_de = recipe_from_dict(load_toml(str(quick)), where=str(quick))
    assert (recipe.pipeline.src_lang, recipe.pipeline.tgt_lang) == pair
    as_en_de = replace(recipe, pipeline=replace(recipe.pipeline, src_lang="en", tgt_lang="de"))
    assert as_en_de == en_de


def test_extends_cycle_is_an_error(tmp_path):
    (tmp_path / "a.toml").write_text('extends = "b.toml"\n')
    (tmp_path / "b.toml").write_text('extends = "a.toml"\n')
    with pytest.raises(ConfigError, match="cycle"):
        load_toml(str(tmp_path / "a.toml"))


def test_shipped_sibling_recipes_load():
    from pathlib import Path

    from aiayn.config_io import recipe_from_dict

    configs = Path(__file__).parents[1] / "configs"
    langs = {}
    for path in sorted(configs.glob("multi30k_*.toml")):
        recipe = recipe_from_dict(load_toml(str(path)), where=str(path))
        langs[path.stem] = (
            recipe.pipeline.src_lang,
            recipe.pipeline.tgt_lang,
            recipe.pipeline.text,
        )
    assert langs["multi30k_de_en_tiny"] == ("de", "en", "tok")
    assert langs["multi30k_en_fr_tiny"] == ("en", "fr", "tok")
    assert langs["multi30k_en_de_tiny_raw"] == ("en", "de", "raw")
    assert langs["multi30k_en_de_quick"] == ("en", "de", "raw")
    assert langs["multi30k_fr_en_tiny_raw"] == ("fr", "en", "raw")  # Fr->De through English
    assert langs["multi30k_fr_de_tiny_raw"] == ("fr", "de", "raw")  # and the direct model
    assert langs["multi30k_fr_en_quick"] == ("fr", "en", "raw")  # the same, in minutes
    assert langs["multi30k_fr_de_quick"] == ("fr", "de", "raw")
