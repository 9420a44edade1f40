"""The table of the Transformer's parameters (``aiayn.modules.parameters``): it lists every
parameter a model has, with its shape; it is the only place in the source that names them;
and a parameter added to a layer fails the token step and every converter until they
handle it."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import torch
from torch import nn

import aiayn
from aiayn.accel.stepper import fast_stepper
from aiayn.accel.token_step import UnsupportedLayerError, layer_weights
from aiayn.interop.destination import ExportError
from aiayn.models import build_model
from aiayn.modules import parameters
from aiayn.modules.layers import DecoderLayer
from aiayn.modules.parameters import TABLE, layer_prefix, model_sizes, unhandled

from .conftest import tiny_config

SRC = Path(aiayn.__file__).parent
VARIANTS = [
    {},
    {"norm_first": True, "positional": "learned", "output_bias": True},
    {"share_embeddings": False, "tie_output": False, "tgt_vocab_size": 41},
    {"bias": False},
]


@pytest.mark.parametrize("overrides", VARIANTS, ids=["paper", "pre-norm", "untied", "no-bias"])
def test_the_table_lists_every_parameter_with_its_shape(overrides):
    cfg = tiny_config(n_encoder_layers=2, n_decoder_layers=3, **overrides)
    state = build_model(cfg).state_dict()
    assert unhandled(state, TABLE) == []
    sizes = model_sizes(cfg)
    listed = set()
    for stack, n in (("encoder", cfg.n_encoder_layers), ("decoder", cfg.n_decoder_layers)):
        for i in range(n):
            for part in TABLE[stack]:
                weight, bias = part.names(layer_prefix(stack, i))
                assert tuple(state[weight].shape) == part.weight_shape(sizes), weight
                assert bias not in state or state[bias].shape[0] == state[weight].shape[0]
                listed |= {weight, bias}
    for part in TABLE[""]:
        weight, bias = part.names()
        if weight in state:
            assert tuple(state[weight].shape) == part.weight_shape(sizes), weight
        listed |= {weight, bias}
    assert set(state) <= listed


def test_the_table_is_the_only_place_in_the_source_that_names_the_parameters():
    """The paths of the parts (``self_attn.qkv_proj``, ``ffn.w_1``, ``output.proj``, ...)
    are written in ``modules/parameters.py`` alone: the token step and the converters read
    the table's parts."""
    paths = sorted({part.path for parts in TABLE.values() for part in parts}, key=len)
    pattern = re.compile(r"(?<!\w)(?:" + "|".join(map(re.escape, paths)) + r")(?!\w)")
    found = [
        f"{path.relative_to(SRC)}:{number}: {line.strip()}"
        for path in sorted(SRC.rglob("*.py"))
        if path != Path(parameters.__file__)
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
        if pattern.search(line)
    ]
    assert found == []


@pytest.fixture
def gated_decoder_layers(monkeypatch):
    """Every ``DecoderLayer`` built from now on has a new parameter (a gate, say), as a
    developer adding one to the layer would give it."""
    built = DecoderLayer.__init__

    def with_gate(self, **parts):
        built(self, **parts)
        self.gate = nn.Parameter(torch.ones(1))

    return lambda: monkeypatch.setattr(DecoderLayer, "__init__", with_gate)


def test_a_new_decoder_parameter_fails_the_token_step_and_every_converter(
    tmp_path, gated_decoder_layers
):
    pytest.importorskip("transformers", reason="the export extra is a dev dependency")
    pytest.importorskip("ctranslate2", reason="the export extra is a dev dependency")
    from aiayn.interop.ct2 import convert
    from aiayn.interop.hf import export_hf, marian_weights
    from aiayn.interop.marian import MarianImportError, import_marian

    from .interop.models import model_dir

    export_hf(model_dir(tmp_path / "aiayn"), tmp_path / "hf")  # a Marian model, as before
    gated_decoder_layers()
    cfg = tiny_config()
    model = build_model(cfg, profile="reference").eval()
    assert "decoder.layers.0.gate" in model.state_dict()
    with pytest.raises(UnsupportedLayerError, match="gate"):
        layer_weights(model.decoder.layers[0])
    with pytest.raises(UnsupportedLayerError, match="gate"):
        fast_stepper(build_model(cfg, profile="fast").eval(), packed=False)
    with pytest.raises(ExportError, match=r"decoder\.layers\.0\.gate"):
        marian_weights(model.state_dict(), cfg)
    vocabulary = [f"w{i}" for i in range(cfg.tgt_vocab_size)]
    with pytest.raises(ExportError, match=r"decoder\.layers\.0\.gate"):
        convert(model, vocabulary, vocabulary, str(tmp_path / "ct2"))
    with pytest.raises(MarianImportError, match=r"decoder\.layers\.0\.gate"):
        import_marian(tmp_path / "hf", tmp_path / "imported")
