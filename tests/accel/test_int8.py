"""int8 linear maps, and a model's int8 decoding copy, against float32."""

import pytest
import torch
from torch import nn

from aiayn.accel import int8 as int8_module
from aiayn.accel.int8 import (
    Int8Error,
    Int8Linear,
    int8_available,
    quantized_for_decoding,
    reduces_range,
    weight_scales,
)
from aiayn.accel.profiles import stepper_for
from aiayn.accel.stepper import TokenStepper
from aiayn.cli import build_parser
from aiayn.config_io import recipe_from_dict
from aiayn.decode import beam_search, greedy_search
from aiayn.errors import AiaynError, ConfigError
from aiayn.modules.stepper import PrecisionError, TransformerStepper
from aiayn.pipeline.stages import search_options
from aiayn.runtime import decoding_precision
from aiayn.search_options import SearchOptions

from ..conftest import random_tokens, tiny_model

pytestmark = [
    pytest.mark.skipif(not int8_available(), reason="no quantised CPU kernels"),
    pytest.mark.isa,
]


def _relative_error(out: torch.Tensor, ref: torch.Tensor) -> float:
    return ((out - ref).abs().max() / ref.abs().max()).item()


@pytest.mark.parametrize("bias", [False, True])
def test_int8_linear_is_linear_within_the_quantisation_error(bias):
    torch.manual_seed(0)
    linear = nn.Linear(64, 40, bias=bias)
    x = torch.randn(3, 5, 64)
    out, ref = Int8Linear(linear)(x), linear(x)
    assert out.shape == ref.shape and out.dtype == torch.float32
    assert _relative_error(out, ref) < 0.03
    assert not torch.equal(out, ref)  # it multiplies in int8, not float32


def test_weight_scales_map_each_row_s_largest_magnitude_to_127():
    weight = torch.tensor([[1.0, -2.0, 0.5], [0.0, 0.0, 0.0], [0.3, 0.1, -0.2]])
    scales = weight_scales(weight)
    assert scales.dtype == torch.float64
    assert scales[[0, 2]].tolist() == pytest.approx([2 / 127, 0.3 / 127])
    assert 0 < scales[1] < 1e-12  # an all-zero row quantises to zeros, not NaN


def test_activations_are_7_bits_exactly_without_vnni(monkeypatch):
    monkeypatch.delenv("FBGEMM_ENABLE_INSTRUCTIONS", raising=False)
    for vnni in (True, False):
        monkeypatch.setattr(torch.cpu, "_is_vnni_supported", lambda vnni=vnni: vnni)
        reduces_range.cache_clear()
        assert reduces_range() is (not vnni)
    reduces_range.cache_clear()


@pytest.mark.parametrize(("held", "seven_bits"), [("avx2", True), ("AVX512_E1", False)])
def test_activations_are_7_bits_where_fbgemm_is_held_to_kernels_without_vnni(
    monkeypatch, held, seven_bits
):
    monkeypatch.setattr(torch.cpu, "_is_vnni_supported", lambda: True)
    monkeypatch.setenv("FBGEMM_ENABLE_INSTRUCTIONS", held)
    reduces_range.cache_clear()
    assert reduces_range() is seven_bits
    monkeypatch.undo()
    reduces_range.cache_clear()


def test_the_int8_copy_quantises_every_linear_map_and_shares_the_weights():
    model = tiny_model()
    twin = quantized_for_decoding(model)
    plain = [name for name, m in model.named_modules() if type(m) is nn.Linear]
    quantized = [name for name, m in twin.named_modules() if isinstance(m, Int8Linear)]
    assert quantized == plain and len(plain) > 0
    assert not any(type(m) is nn.Linear for m in twin.modules())
    assert any(type(m) is nn.Linear for m in model.modules())  # the model is left as it is
    assert twin.state_dict().keys() == model.state_dict().keys()
    shared = {p.data_ptr() for p in model.parameters()}
    assert all(p.data_ptr() in shared for p in twin.parameters())


def _forced_log_probs(stepper, src: torch.Tensor, tokens: torch.Tensor) -> list[torch.Tensor]:
    """The log-probabilities of every step, feeding ``tokens`` (B, T) one at a time."""
    state, out = stepper.start(src), []
    for t in range(tokens.size(1)):
        log_probs, state = stepper.step(tokens[:, t : t + 1], state)
        out.append(log_probs)
    return out


def test_int8_steps_are_the_paper_s_modules_in_fp32_within_tolerance(monkeypatch):
    """The fast profile's int8 stepper (the token step over int8 maps: every product goes
    through the quantised kernel) against the plain stepper of the same weights in fp32."""
    products = []
    product = int8_module._product
    monkeypatch.setattr(
        int8_module, "_product", lambda *a, **k: products.append(1) or product(*a, **k)
    )
    model = tiny_model()
    src = random_tokens(6, 9, 37, seed=1)
    tokens = random_tokens(6, 7, 37, seed=2)
    tokens[:, 0] = model.specials.bos
    int8 = stepper_for(model, precision="int8")
    assert isinstance(int8, TokenStepper)
    with torch.inference_mode():
        fast = _forced_log_probs(int8, src, tokens)
        plain = _forced_log_probs(TransformerStepper(model), src, tokens)
    assert len(products) > 0
    for a, b in zip(fast, plain, strict=True):
        torch.testing.assert_close(a, b, atol=0.1, rtol=0.05)


@pytest.mark.parametrize(
    "depths", [{}, {"n_encoder_layers": 3, "n_decoder_layers": 1}], ids=["even", "deep-shallow"]
)
def test_int8_composes_with_the_token_step_the_cache_and_beam_search(depths):
    """The token step and the general cached pass over the same int8 maps find the same
    beams (each call quantises the same rows), a student's uneven depths included."""
    model = tiny_model(**depths)
    twin = quantized_for_decoding(model)
    src = random_tokens(4, 8, 37, seed=3)
    with torch.inference_mode():
        fast = beam_search(TokenStepper(twin), src, beam=4, nbest=2, max_len_b=6)
        plain = beam_search(TransformerStepper(twin), src, beam=4, nbest=2, max_len_b=6)
        greedy = greedy_search(TokenStepper(twin), src, max_len=10)
        assert torch.equal(greedy, greedy_search(TransformerStepper(twin), src, max_len=10))
    for a, b in zip(fast, plain, strict=True):
        assert [h.tokens for h in a] == [h.tokens for h in b]
        assert [h.score for h in a] == pytest.approx([h.score for h in b], abs=1e-3)


def test_int8_is_refused_in_one_line_where_it_cannot_run(monkeypatch):
    with pytest.raises(Int8Error, match="CPU only"):
        quantized_for_decoding(tiny_model().to("meta"))
    with pytest.raises(AiaynError, match=r"^precision int8 decodes on the CPU only"):
        decoding_precision("int8", torch.device("cuda"))
    assert decoding_precision("int8", torch.device("cpu")) == "int8"
    with pytest.raises(PrecisionError, match="fast profile"):
        stepper_for(tiny_model(profile="reference"), precision="int8")
    with pytest.raises(ConfigError, match=r"precision must be one of .*int8.*, got 'int4'$"):
        SearchOptions(precision="int4")
    monkeypatch.setattr(int8_module, "int8_available", lambda: False)
    with pytest.raises(Int8Error, match="lacks"):
        quantized_for_decoding(tiny_model())
    for error in (Int8Error, PrecisionError):
        assert issubclass(error, AiaynError)


def test_int8_is_a_value_of_every_surface_s_precision():
    """The recipe, the command line and the Python API take int8 (``SearchOptions``)."""
    recipe = recipe_from_dict({"pipeline": {"precision": "int8"}})
    assert search_options(recipe.pipeline, 0.6).precision == "int8"
    args = build_parser().parse_args(["translate", "--model", "m", "--precision", "int8"])
    assert args.precision == "int8"
    with pytest.raises(ConfigError, match="precision"):
        recipe_from_dict({"pipeline": {"precision": "int4"}})
