"""The invariants again on a GPU: CUDA's attention kernels, decoding, bf16 and fp16 training,
fp16 loss scaling, and checkpoints written on a GPU read on the CPU.

Marked ``gpu``: skipped where CUDA is not available (CI), run by ``pytest -m gpu`` on a
machine with one.
"""

import copy

import pytest
import torch

from aiayn.accel.fused_loss import GPU_CHUNK_ROWS
from aiayn.decode import greedy_search, stepper_for
from aiayn.modules.attention import scaled_dot_product_attention
from aiayn.store import load_model
from aiayn.train import Trainer
from aiayn.translate.translator import SearchOptions, Translator

from .accel.test_fused_loss import assert_fused_equals_cross_entropy
from .conftest import random_tokens
from .decode.test_model_decoding import assert_cached_equals_uncached
from .test_transformer import assert_logits_equal_torch_nn_transformer
from .train.conftest import tiny_train_config, train_losses

pytestmark = pytest.mark.gpu
CUDA = torch.device("cuda")
LINES = ["a b c d", "e f g", "b a", "d d c e f", "g"]


def test_logits_equal_torch_nn_transformer_on_cuda(profile):
    assert_logits_equal_torch_nn_transformer(profile, "cuda", 1e-4)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16])
def test_fused_attention_equals_the_eager_form_on_cuda(dtype):
    g = torch.Generator(device=CUDA).manual_seed(0)
    q, k, v = (torch.randn(3, 4, 7, 16, generator=g, device=CUDA, dtype=dtype) for _ in "qkv")
    mask = torch.ones(3, 1, 1, 7, dtype=torch.bool, device=CUDA)  # (B, 1, 1, S)
    mask[1, ..., 4:] = False
    mask[2, ..., 1:] = False
    fused, _ = scaled_dot_product_attention(q, k, v, mask=mask)
    eager, weights = scaled_dot_product_attention(q, k, v, mask=mask, need_weights=True)
    tolerance = 1e-5 if dtype == torch.float32 else 2e-2
    torch.testing.assert_close(fused, eager, rtol=tolerance, atol=tolerance)
    assert weights[1, ..., 4:].abs().max() == 0 and weights[2, ..., 1:].abs().max() == 0


def test_fused_loss_and_gradients_equal_cross_entropy_on_cuda():
    """Over more rows than one of the GPU's chunks, with its default chunk size."""
    assert_fused_equals_cross_entropy(GPU_CHUNK_ROWS + 808, device="cuda", weight_grad_atol=1e-3)


def test_cached_decoding_equals_uncached_and_the_cpu_on_cuda(trained_model_dir, profile):
    cpu_model, _ = load_model(trained_model_dir, profile=profile)
    model = copy.deepcopy(cpu_model).to(CUDA)
    src = random_tokens(5, 8, 60, pad_from=[8, 3, 6, 2, 8], seed=4)
    cached = assert_cached_equals_uncached(model, src.to(CUDA))
    assert torch.equal(cached.cpu(), greedy_search(stepper_for(cpu_model), src))


@pytest.mark.parametrize("precision", ["fp32", "bf16"])
def test_a_translator_on_cuda_translates_as_on_the_cpu(trained_model_dir, precision):
    options = SearchOptions(beam=4, precision=precision)
    on_gpu = Translator.from_dir(trained_model_dir, device="cuda").translate(LINES, options)
    on_cpu = Translator.from_dir(trained_model_dir).translate(LINES, options)
    assert [t[0].text for t in on_gpu] == [t[0].text for t in on_cpu]


@pytest.mark.parametrize("precision", ["bf16", "fp16"])
def test_mixed_precision_training_on_cuda_lowers_the_loss(tiny_dataset, tmp_path, precision):
    run = {"device": "cuda", "precision": precision, "max_updates": 24}
    trainer = Trainer(tiny_train_config(tiny_dataset, tmp_path / "run", run=run))
    state = trainer.train()
    assert state.update == 24 and state.nonfinite_total == 0
    assert next(trainer.model.parameters()).device.type == "cuda"
    losses = train_losses(tmp_path / "run")
    assert len(losses) == 6 and losses[-1] < losses[0]


def test_fp16_loss_scaling_recovers_from_an_overflow(tiny_dataset, tmp_path):
    """A loss scale far too large makes the first updates' fp16 gradients overflow: those
    optimiser steps are skipped and the scale is lowered until the gradients are finite,
    then training goes on (the loss itself was finite all along)."""
    run = {"device": "cuda", "precision": "fp16", "max_updates": 40}
    trainer = Trainer(tiny_train_config(tiny_dataset, tmp_path / "run", run=run))
    trainer.scaler = torch.amp.GradScaler("cuda", init_scale=2.0**40)
    before = copy.deepcopy(trainer.model.state_dict())
    trainer._update()
    after_overflow = trainer.model.state_dict()
    assert all(torch.equal(before[k], v) for k, v in after_overflow.items()), "step not skipped"
    assert trainer.scaler.get_scale() < 2.0**40
    state = trainer.train()
    assert state.nonfinite_total == 0
    assert any(not torch.equal(before[k], v) for k, v in trainer.model.state_dict().items())
    assert all(torch.isfinite(p).all() for p in trainer.model.parameters())


def test_a_checkpoint_written_on_cuda_loads_on_the_cpu(tiny_dataset, tmp_path):
    run = {"device": "cuda", "precision": "bf16", "max_updates": 6}
    trainer = Trainer(tiny_train_config(tiny_dataset, tmp_path / "run", run=run))
    trainer.train()
    model, _ = load_model(tmp_path / "run" / "best")
    trained = trainer.model.state_dict()
    for name, tensor in model.state_dict().items():
        assert tensor.device.type == "cpu"
        assert torch.equal(tensor, trained[name].cpu()), name
    assert Translator.from_dir(tmp_path / "run" / "best").translate(LINES[:2])
