"""The encoder–decoder model: parity with torch.nn.Transformer and the core invariants."""

import pytest
import torch
from torch import nn

from aiayn import masks
from aiayn.config import BOS_ID, PAD_ID, model_preset
from aiayn.models import build_model

from .conftest import copy_task, copy_task_model, random_tokens, tiny_config, tiny_model


def _reference_from(model, cfg) -> nn.Transformer:
    """A torch.nn.Transformer holding the same weights as our post-norm model."""
    ref = nn.Transformer(
        d_model=cfg.d_model,
        nhead=cfg.n_heads,
        num_encoder_layers=cfg.n_encoder_layers,
        num_decoder_layers=cfg.n_decoder_layers,
        dim_feedforward=cfg.d_ff,
        dropout=0.0,
        batch_first=True,
    )
    ref.encoder.norm = None  # post-norm layers already end in a LayerNorm (§3.1)
    ref.decoder.norm = None
    with torch.no_grad():
        for ours, theirs in zip(model.encoder.layers, ref.encoder.layers, strict=True):
            _copy_linear(ours.self_attn.qkv_proj, theirs.self_attn, "in_proj")
            _copy_linear(ours.self_attn.out_proj, theirs.self_attn.out_proj)
            _copy_ffn_and_norms(ours, theirs, ["self_attn_connection", "ffn_connection"])
        for ours, theirs in zip(model.decoder.layers, ref.decoder.layers, strict=True):
            _copy_linear(ours.self_attn.qkv_proj, theirs.self_attn, "in_proj")
            _copy_linear(ours.self_attn.out_proj, theirs.self_attn.out_proj)
            cross = ours.cross_attn
            theirs.multihead_attn.in_proj_weight.copy_(
                torch.cat([cross.q_proj.weight, cross.kv_proj.weight])
            )
            theirs.multihead_attn.in_proj_bias.copy_(
                torch.cat([cross.q_proj.bias, cross.kv_proj.bias])
            )
            _copy_linear(cross.out_proj, theirs.multihead_attn.out_proj)
            _copy_ffn_and_norms(
                ours, theirs, ["self_attn_connection", "cross_attn_connection", "ffn_connection"]
            )
    return ref.eval()


def _copy_linear(src, dst, prefix=None):
    weight = getattr(dst, f"{prefix}_weight") if prefix else dst.weight
    bias = getattr(dst, f"{prefix}_bias") if prefix else dst.bias
    weight.copy_(src.weight)
    bias.copy_(src.bias)


def _copy_ffn_and_norms(ours, theirs, connections):
    _copy_linear(ours.ffn.w_1, theirs.linear1)
    _copy_linear(ours.ffn.w_2, theirs.linear2)
    for i, name in enumerate(connections, start=1):
        _copy_linear(getattr(ours, name).norm, getattr(theirs, f"norm{i}"))


def assert_logits_equal_torch_nn_transformer(profile: str, device: str, tolerance: float):
    """Our post-norm model and a torch.nn.Transformer with its weights, on padded batches."""
    cfg = tiny_config(n_encoder_layers=3, n_decoder_layers=2)
    torch.manual_seed(0)
    model = build_model(cfg, profile=profile).eval()
    ref = _reference_from(model, cfg).to(device)
    model.to(device)
    src = random_tokens(3, 9, cfg.src_vocab_size, pad_from=[9, 5, 2], seed=1).to(device)
    tgt = random_tokens(3, 7, cfg.tgt_vocab_size, pad_from=[7, 3, 6], seed=2).to(device)
    tgt[:, 0] = BOS_ID
    with torch.no_grad():
        ours = model(src, tgt)
        hidden = ref(
            model.src_embed(src),
            model.tgt_embed(tgt),
            tgt_mask=nn.Transformer.generate_square_subsequent_mask(7, device=device),
            src_key_padding_mask=src == PAD_ID,
            tgt_key_padding_mask=tgt == PAD_ID,
            memory_key_padding_mask=src == PAD_ID,
            tgt_is_causal=True,
        )
        theirs = model.output(hidden)
    real = tgt != PAD_ID
    torch.testing.assert_close(ours[real], theirs[real], rtol=tolerance, atol=tolerance)


def test_logits_equal_torch_nn_transformer_with_padding(profile):
    assert_logits_equal_torch_nn_transformer(profile, "cpu", 1e-5)


@pytest.mark.parametrize(("preset", "paper"), [("base", 65e6), ("big", 213e6)])
def test_parameter_count_matches_table_3(preset, paper):
    with torch.device("meta"):  # shapes only: no memory, no initialisation to wait for
        model = build_model(model_preset(preset).with_vocab(37000))
    count = sum(p.numel() for p in model.parameters())  # tied weights counted once
    assert abs(count - paper) / paper < 0.05, count


def test_shared_and_tied_embeddings_are_one_tensor():
    model = tiny_model()
    assert model.src_embed.tokens.weight is model.tgt_embed.tokens.weight
    assert model.output.weight is model.tgt_embed.tokens.weight
    untied = tiny_model(share_embeddings=False, tie_output=False, tgt_vocab_size=41)
    assert untied.output.weight is not untied.tgt_embed.tokens.weight
    assert untied.output.weight.shape == (41, 32)


def test_embeddings_are_scaled_by_sqrt_d_model():
    model = tiny_model()
    ids = torch.tensor([[5, 6]])
    expected = model.src_embed.tokens.embedding(ids) * 32**0.5
    torch.testing.assert_close(model.src_embed.tokens(ids), expected)


@pytest.mark.parametrize(
    "overrides",
    [
        {},
        {"norm_first": True},
        {"positional": "learned"},
        {"positional": "sinusoidal_concat"},
    ],
)
def test_cached_step_by_step_decoding_equals_full_prefix(overrides, profile):
    model = tiny_model(profile=profile, **overrides)
    src = random_tokens(2, 6, 37, pad_from=[6, 4], seed=3)
    tgt = random_tokens(2, 5, 37, seed=4)
    with torch.no_grad():
        src_mask = model.source_mask(src)
        memory = model.encode(src, src_mask)
        full, none = model.decode(tgt, src_mask, memory=memory)
        assert none is None
        _, full_cache = model.decode(tgt, src_mask, cache=model.start_cache(memory))
        cache = model.start_cache(memory)
        steps = []
        for t in range(tgt.size(1)):
            hidden, cache = model.decode(tgt[:, t : t + 1], src_mask, cache=cache)
            steps.append(hidden)
    torch.testing.assert_close(torch.cat(steps, dim=1), full, rtol=1e-5, atol=1e-5)
    assert cache.length == full_cache.length == 5
    torch.testing.assert_close(cache.self_attn[0].keys, full_cache.self_attn[0].keys)


def test_pre_norm_has_final_norms_and_post_norm_has_none():
    assert tiny_model(norm_first=True).encoder.final_norm is not None
    assert tiny_model().decoder.final_norm is None


def test_padding_content_never_changes_real_positions(profile):
    model = tiny_model(profile=profile)
    src = random_tokens(2, 8, 37, pad_from=[8, 5], seed=5)
    tgt = random_tokens(2, 6, 37, pad_from=[6, 4], seed=6)
    with torch.no_grad():
        before = model(src, tgt)
        src2, tgt2 = src.clone(), tgt.clone()
        src2[1, 5:] = 17  # garbage where the padding was, masks still say padding
        tgt2[1, 4:] = 23
        src_mask = model.source_mask(src)
        memory = model.encode(src2, src_mask)
        hidden, _ = model.decode(
            tgt2, src_mask, memory=memory, tgt_mask=masks.decoder_self_mask(tgt, PAD_ID)
        )
        after = model.logits(hidden)
    torch.testing.assert_close(after[0], before[0])
    torch.testing.assert_close(after[1, :4], before[1, :4])


def test_attention_maps_are_distributions_and_zero_on_padding(profile):
    model = tiny_model(profile=profile)
    src = random_tokens(2, 7, 37, pad_from=[7, 4], seed=7)
    tgt = random_tokens(2, 5, 37, seed=8)
    with torch.no_grad():
        logits, maps = model.forward_with_attention(src, tgt)
        torch.testing.assert_close(logits, model(src, tgt))
    assert len(maps.encoder_self) == 2 and len(maps.decoder_cross) == 2
    for w in maps.encoder_self + maps.decoder_self + maps.decoder_cross:
        torch.testing.assert_close(w.sum(-1), torch.ones(w.shape[:-1]))
    assert torch.all(maps.decoder_cross[0][1, :, :, 4:] == 0)
    assert torch.all(maps.decoder_self[0].triu(diagonal=1) == 0)


def test_dropout_is_active_in_training_only(profile):
    model = tiny_model(profile=profile, dropout=0.5)
    src = random_tokens(2, 6, 37, seed=9)
    tgt = random_tokens(2, 5, 37, seed=10)
    model.train()
    assert not torch.equal(model(src, tgt), model(src, tgt))
    model.eval()
    assert torch.equal(model(src, tgt), model(src, tgt))


def test_tiny_model_learns_the_copy_task(copy_task_weights):
    """The Annotated Transformer's first exercise (examples/copy_task.py): copy the input
    (the fixture trains it with the example's ``train``)."""
    accuracy, _, _ = copy_task().evaluate(copy_task_model(copy_task_weights))
    assert accuracy >= 0.98, accuracy


def test_query_key_value_init_has_the_fairseq_bound():
    model = build_model(model_preset("tiny").with_vocab(100))
    bound = (3 / (2 * 128)) ** 0.5  # Xavier with gain 1/sqrt(2) on a (128, 128) block
    layer = model.decoder.layers[0]
    for weight in (
        layer.self_attn.qkv_proj.weight,
        layer.cross_attn.q_proj.weight,
        layer.cross_attn.kv_proj.weight,
    ):
        assert weight.abs().max() <= bound
        assert weight.abs().max() > 0.95 * bound
    out_bound = (6 / (2 * 128)) ** 0.5  # W_O: plain Xavier
    assert layer.self_attn.out_proj.weight.abs().max() > bound
    assert layer.self_attn.out_proj.weight.abs().max() <= out_bound


def test_both_profiles_build_the_same_weights_and_compute_the_same_logits():
    ref, fast = tiny_model(profile="reference"), tiny_model(profile="fast")
    assert ref.profile.name == "reference" and fast.profile.name == "fast"
    a, b = ref.state_dict(), fast.state_dict()
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)
    src = random_tokens(3, 8, 37, pad_from=[8, 5, 2], seed=11)
    tgt = random_tokens(3, 6, 37, pad_from=[6, 3, 5], seed=12)
    tgt[:, 0] = BOS_ID
    with torch.no_grad():
        torch.testing.assert_close(fast(src, tgt), ref(src, tgt), rtol=1e-5, atol=1e-5)
