"""``aiayn.accel.token_step.TokenStep`` (through ``TokenStepper``) against the
reference stepper: the plain decoder pass over a ``torch.cat`` cache, every row holding its
own copy of the memory."""

import inspect

import pytest
import torch

from aiayn.accel import packed as packed_module
from aiayn.accel import stepper as stepper_module
from aiayn.accel.attention import MIN_SOFTMAX_SPAN
from aiayn.accel.packed import PackedFromRows, onednn_available, probe_onednn
from aiayn.accel.stepper import SharedMemoryStepper, TokenStepper, fast_stepper
from aiayn.accel.token_step import (
    DECODER_LAYER_PARAMETERS,
    HANDLED_OPTIONS,
    TokenStepState,
    UnsupportedLayerError,
    layer_weights,
    parameter_names,
)
from aiayn.decode import TransformerStepper
from aiayn.models.transformer import Stack, Transformer
from aiayn.modules import CrossAttention, DecoderLayer, PositionwiseFeedForward, SelfAttention
from aiayn.modules.layers import SublayerConnection

from ..conftest import tiny_model

SENTENCES, WIDTH = 3, 3  # WIDTH: beams per sentence


def _steppers(**overrides):
    ref = TransformerStepper(tiny_model(profile="reference", **overrides))
    fast = fast_stepper(tiny_model(profile="fast", **overrides), packed=False)
    return ref, fast


def _source(length: int) -> torch.Tensor:
    src = torch.randint(4, 37, (SENTENCES, length), generator=torch.Generator().manual_seed(1))
    src[1, length // 2 :] = 0  # padding
    return src


def _beam_like_rows(step: int, n: int, width: int, g: torch.Generator) -> torch.Tensor:
    """Rows a beam search might keep: W per sentence, each from a beam of its sentence
    (with W = 1, greedy search's: each row stays)."""
    if step == 0:
        return torch.arange(n).repeat_interleave(width)  # one row per sentence -> W
    sentences = n // width
    picks = torch.randint(0, width, (sentences, width), generator=g)  # (B, W)
    return (picks + width * torch.arange(sentences)[:, None]).view(-1)


@pytest.mark.parametrize(
    "overrides",
    [
        {},
        {"norm_first": True},
        {"activation": "swish", "positional": "learned"},
        {"n_encoder_layers": 3, "n_decoder_layers": 1},  # a student's shape
    ],
    ids=["post-norm", "pre-norm", "swish-learned", "deep-shallow"],
)
@pytest.mark.parametrize("src_len", [5, MIN_SOFTMAX_SPAN + 4])
@pytest.mark.parametrize("width", [1, WIDTH], ids=["greedy", "beams"])
def test_steps_equal_the_reference_through_reselections_and_ended_sentences(
    overrides, src_len, width
):
    ref, fast = _steppers(**overrides)
    src = _source(src_len)
    g = torch.Generator().manual_seed(2)
    ref_state, fast_state = ref.start(src), fast.start(src)
    assert isinstance(fast_state, TokenStepState)  # the path under test
    tokens = torch.full((SENTENCES, 1), 2)
    for step in range(2 * MIN_SOFTMAX_SPAN + 8):  # past the span, buffers grown to their room
        expected, ref_state = ref.step(tokens, ref_state)
        got, fast_state = fast.step(tokens, fast_state)
        torch.testing.assert_close(got, expected, atol=1e-5, rtol=1e-5)
        if step % 3 == 2 and step != 20:  # no reselection: the next step grows the buffers
            tokens = torch.randint(4, 37, (len(tokens), 1), generator=g)
            continue
        rows = _beam_like_rows(step, len(tokens), width, g)  # (N',)
        sentences = None
        if step == 20:  # sentence 1 ends: its rows leave the batch
            sentences = torch.tensor([0, 2])
            rows = rows.view(SENTENCES, width)[sentences].view(-1)
        ref_state = ref.reorder(ref_state, rows)
        fast_state = fast.reorder(fast_state, rows, sentences=sentences)
        tokens = torch.randint(4, 37, (len(rows), 1), generator=g)


@pytest.mark.skipif(not onednn_available(), reason="PyTorch built without oneDNN")
def test_steps_through_packed_small_maps_equal_the_reference(monkeypatch):
    """The decoder's small maps packed from one row on (``PackedFromRows``): the step calls
    their packed weights, float32, and still computes the reference's scores."""
    monkeypatch.setattr(stepper_module, "MIN_PACKED_PRODUCT", 1)
    ref = TransformerStepper(tiny_model(profile="reference"))
    fast = fast_stepper(tiny_model(profile="fast"))
    layer = fast.model.decoder.layers[0]
    assert isinstance(layer.self_attn.qkv_proj, PackedFromRows)
    assert layer.self_attn.qkv_proj.min_rows == 1
    src = _source(7)
    ref_state, fast_state = ref.start(src), fast.start(src)
    tokens = torch.full((SENTENCES, 1), 2)
    g = torch.Generator().manual_seed(3)
    for step in range(MIN_SOFTMAX_SPAN + 3):
        expected, ref_state = ref.step(tokens, ref_state)
        got, fast_state = fast.step(tokens, fast_state)
        torch.testing.assert_close(got, expected, atol=1e-4, rtol=1e-4)
        rows = _beam_like_rows(step, len(tokens), WIDTH, g)
        ref_state, fast_state = ref.reorder(ref_state, rows), fast.reorder(fast_state, rows)
        tokens = torch.randint(4, 37, (len(rows), 1), generator=g)


def test_stepping_one_state_twice_leaves_the_first_result_intact():
    _, fast = _steppers()
    src = _source(6)
    state = fast.start(src)
    for t in range(MIN_SOFTMAX_SPAN + 2):
        _, state = fast.step(torch.full((SENTENCES, 1), 4 + t), state)
    first_scores, first = fast.step(torch.full((SENTENCES, 1), 5), state)
    fast.step(torch.full((SENTENCES, 1), 9), state)  # a branch from the same state
    after_branch, _ = fast.step(torch.full((SENTENCES, 1), 6), first)
    again_scores, again = fast.step(torch.full((SENTENCES, 1), 5), state)
    unbranched, _ = fast.step(torch.full((SENTENCES, 1), 6), again)
    torch.testing.assert_close(again_scores, first_scores)
    torch.testing.assert_close(after_branch, unbranched)


def test_a_training_model_decodes_through_the_plain_pass():
    model = tiny_model(profile="fast").train()
    assert isinstance(fast_stepper(model), SharedMemoryStepper)
    assert isinstance(fast_stepper(model.eval()), TokenStepper)


# -- the step reads the paper's layers through one specification ------------------------------

SPECIFIED = {  # the classes HANDLED_OPTIONS names
    cls.__name__: cls
    for cls in (
        Transformer,
        Stack,
        DecoderLayer,
        SublayerConnection,
        SelfAttention,
        CrossAttention,
        PositionwiseFeedForward,
    )
}


def test_the_specification_handles_every_option_of_the_parts_it_reads():
    """A new, removed or renamed constructor option of the model, its decoder or a part of
    a decoder layer fails here until ``HANDLED_OPTIONS`` (and ``layer_weights``) say how the
    step handles it."""
    assert set(HANDLED_OPTIONS) == set(SPECIFIED)
    for name, handled in HANDLED_OPTIONS.items():
        options = set(inspect.signature(SPECIFIED[name].__init__).parameters) - {"self"}
        assert options == set(handled), name


@pytest.mark.parametrize(
    "overrides", [{}, {"norm_first": True}, {"bias": False}], ids=["post", "pre", "no-bias"]
)
def test_the_specification_reads_every_parameter_of_the_decoder(profile, overrides):
    """Every parameter of a decoder layer is one ``layer_weights`` reads, by its name (a new,
    removed or renamed one fails here), and the decoder has none beside its layers but the
    final LayerNorm of pre-norm layers; the same for the packed copy a stepper decodes
    through."""
    model = tiny_model(profile=profile, **overrides)
    expected = {
        name
        for name in DECODER_LAYER_PARAMETERS
        if overrides.get("bias", True) or not name.endswith(".bias")
    }
    twin = fast_stepper(model).model
    for layer, packed in zip(model.decoder.layers, twin.decoder.layers, strict=True):
        assert parameter_names(layer) == expected
        assert parameter_names(packed) == expected
    outside = {n for n, _ in model.decoder.named_parameters() if not n.startswith("layers.")}
    norm = {"final_norm.weight"} | ({"final_norm.bias"} if overrides.get("bias", True) else set())
    assert outside == (norm if overrides.get("norm_first") else set())


def test_a_layer_with_a_parameter_the_specification_does_not_read_is_refused():
    model = tiny_model(profile="fast")
    layer = model.decoder.layers[1]
    layer.ffn.gate = torch.nn.Parameter(torch.ones(1))  # a gated FFN, say
    with pytest.raises(UnsupportedLayerError, match=r"ffn\.gate"):
        layer_weights(layer)
    with pytest.raises(UnsupportedLayerError):
        fast_stepper(model, packed=False)


class _Ops:
    """A stand-in for ``torch.ops.mkldnn`` with chosen operators."""

    def __init__(self, **ops):
        self.__dict__.update(ops)


def _raise(*args):
    raise RuntimeError("no kernel for this CPU")


@pytest.mark.parametrize(
    "ops",
    [
        _Ops(),  # the operators are gone
        _Ops(_reorder_linear_weight=lambda w, _: w, _linear_pointwise=_raise),
        _Ops(  # they run, but compute something else
            _reorder_linear_weight=lambda w, _: w,
            _linear_pointwise=lambda x, w, b, *_: torch.nn.functional.linear(x, w),
        ),
    ],
    ids=["missing", "raising", "disagreeing"],
)
def test_the_onednn_probe_says_no_to_operators_that_fail(ops):
    assert not probe_onednn(ops)


@pytest.fixture
def failed_probe(monkeypatch):
    monkeypatch.setattr(packed_module, "probe_onednn", lambda ops: False)
    packed_module.onednn_available.cache_clear()
    packed_module.packs_bfloat16.cache_clear()
    yield
    monkeypatch.undo()
    packed_module.onednn_available.cache_clear()
    packed_module.packs_bfloat16.cache_clear()


def test_without_working_onednn_operators_the_fast_stepper_decodes_unpacked(failed_probe):
    model = tiny_model(profile="fast")
    assert not packed_module.onednn_available() and not packed_module.can_pack(model)
    fast = fast_stepper(model)
    assert fast.model is model  # no packed copy: the model's own nn.Linear maps
    ref = TransformerStepper(tiny_model(profile="reference"))
    src = _source(7)
    expected, _ = ref.step(torch.full((SENTENCES, 1), 2), ref.start(src))
    got, _ = fast.step(torch.full((SENTENCES, 1), 2), fast.start(src))
    torch.testing.assert_close(got, expected, atol=1e-5, rtol=1e-5)


def test_the_onednn_probe_passes_where_the_operators_work():
    if torch.backends.mkldnn.is_available():
        assert probe_onednn(torch.ops.mkldnn)
