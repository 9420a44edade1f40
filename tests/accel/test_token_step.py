"""``aiayn.accel.token_step.TokenStep`` (through ``FastTransformerStepper``) against the
reference stepper: the plain decoder pass over a ``torch.cat`` cache, every row holding its
own copy of the memory."""

import pytest
import torch

from aiayn.accel.packed import PackedFromRows, onednn_available
from aiayn.accel.token_step import MIN_SPAN, TokenStepState
from aiayn.decode import FastTransformerStepper, TransformerStepper
from aiayn.decode import stepper as stepper_module

from ..conftest import tiny_model

SENTENCES, WIDTH = 3, 3  # WIDTH: beams per sentence


def _steppers(**overrides):
    ref = TransformerStepper(tiny_model(profile="reference", **overrides))
    fast = FastTransformerStepper(tiny_model(profile="fast", **overrides), packed=False)
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
    [{}, {"norm_first": True}, {"activation": "swish", "positional": "learned"}],
    ids=["post-norm", "pre-norm", "swish-learned"],
)
@pytest.mark.parametrize("src_len", [5, MIN_SPAN + 4])
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
    for step in range(2 * MIN_SPAN + 8):  # past MIN_SPAN, buffers grown to their room
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
    fast = FastTransformerStepper(tiny_model(profile="fast"))
    layer = fast.model.decoder.layers[0]
    assert isinstance(layer.self_attn.qkv_proj, PackedFromRows)
    assert layer.self_attn.qkv_proj.min_rows == 1
    src = _source(7)
    ref_state, fast_state = ref.start(src), fast.start(src)
    tokens = torch.full((SENTENCES, 1), 2)
    g = torch.Generator().manual_seed(3)
    for step in range(MIN_SPAN + 3):
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
    for t in range(MIN_SPAN + 2):
        _, state = fast.step(torch.full((SENTENCES, 1), 4 + t), state)
    first_scores, first = fast.step(torch.full((SENTENCES, 1), 5), state)
    fast.step(torch.full((SENTENCES, 1), 9), state)  # a branch from the same state
    after_branch, _ = fast.step(torch.full((SENTENCES, 1), 6), first)
    again_scores, again = fast.step(torch.full((SENTENCES, 1), 5), state)
    unbranched, _ = fast.step(torch.full((SENTENCES, 1), 6), again)
    torch.testing.assert_close(again_scores, first_scores)
    torch.testing.assert_close(after_branch, unbranched)


def test_a_training_model_decodes_through_the_plain_pass():
    _, fast = _steppers()
    fast.model.train()
    assert not isinstance(fast.start(_source(6)), TokenStepState)
