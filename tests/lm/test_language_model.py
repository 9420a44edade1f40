"""The decoder-only language model: structure, cache parity, training, generation, CLI."""

import shutil

import pytest
import torch

from aiayn.cli import main
from aiayn.config import EOS_ID, ModelConfig
from aiayn.config_io import train_config_from_dict
from aiayn.data.lm_stream import prepare_lm
from aiayn.decode import generate
from aiayn.models import TransformerLM, build_model
from aiayn.store import load_model
from aiayn.train import Trainer

LM = dict(n_encoder_layers=0, n_decoder_layers=2, d_model=32, n_heads=4, d_ff=64, dropout=0.0)
TEXT = "the quick brown fox jumps over the lazy dog.\n" * 40


def lm(seed=0, profile="fast", **overrides) -> TransformerLM:
    torch.manual_seed(seed)
    cfg = ModelConfig(**{**LM, **overrides}).with_vocab(30)
    return build_model(cfg, profile=profile).eval()


def test_decoder_only_layers_have_no_cross_attention_weights():
    model = lm()
    assert all(layer.cross_attn is None for layer in model.decoder.layers)
    assert not any("cross" in name for name, _ in model.named_parameters())
    assert model.output.weight is model.embed.tokens.weight
    assert lm(norm_first=True).decoder.final_norm is not None


@pytest.mark.parametrize(
    "overrides",
    [{}, {"positional": "learned", "max_positions": 16}, {"norm_first": True, "bias": False}],
)
def test_cached_steps_equal_the_full_forward(overrides, profile):
    model = lm(profile=profile, **overrides)
    tokens = torch.randint(4, 30, (2, 12), generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        full = model(tokens)
        cache = model.start_cache()
        steps = []
        for t in range(12):
            hidden, cache = model.decode(tokens[:, t : t + 1], cache=cache)
            steps.append(model.logits(hidden))
    torch.testing.assert_close(torch.cat(steps, dim=1), full, rtol=1e-5, atol=1e-5)


def test_future_tokens_never_change_the_past():
    model = lm()
    a = torch.randint(4, 30, (1, 10), generator=torch.Generator().manual_seed(2))
    b = a.clone()
    b[0, 6:] = 5
    with torch.no_grad():
        torch.testing.assert_close(model(a)[:, :6], model(b)[:, :6])


def test_cached_generation_equals_uncached_with_the_same_seed():
    model = lm()
    kwargs = dict(max_new_tokens=40, temperature=1.0, top_k=10)
    cached = generate(model, [5, 6, 7], generator=torch.Generator().manual_seed(3), **kwargs)
    uncached = generate(
        model, [5, 6, 7], generator=torch.Generator().manual_seed(3), use_cache=False, **kwargs
    )
    assert cached == uncached and len(cached) == 40


def test_generation_respects_limits_and_stops_at_eos():
    model = lm()
    with torch.no_grad():
        model.output.proj.weight[EOS_ID] += 50.0 * model.output.proj.weight[EOS_ID].sign()
    out = generate(model, [5], max_new_tokens=30, temperature=0.0, stop_id=EOS_ID)
    assert out[-1] == EOS_ID and len(out) <= 30
    assert len(generate(lm(), [5], max_new_tokens=7, temperature=1.0)) == 7


def test_learned_positions_keep_generating_past_the_window():
    model = lm(positional="learned", max_positions=16)
    out = generate(model, list(range(4, 14)), max_new_tokens=40, temperature=0.0)
    assert len(out) == 40


def test_top_k_one_is_greedy():
    model = lm()
    greedy = generate(model, [5, 6], max_new_tokens=20, temperature=0.0)
    top1 = generate(
        model,
        [5, 6],
        max_new_tokens=20,
        temperature=1.3,
        top_k=1,
        generator=torch.Generator().manual_seed(9),
    )
    assert greedy == top1


def _lm_config(root, run_dir, *, max_updates: int):
    """The tiny language model's recipe on ``root``'s prepared text."""
    return train_config_from_dict(
        {
            "task": "lm",
            "model": {**LM, "positional": "learned", "max_positions": 32, "norm_first": True},
            "data": {
                "dir": str(root / "data"),
                "block_size": 32,
                "batch_size": 8,
                "valid_batches": 4,
            },
            "optim": {
                "optimizer": "adamw",
                "betas": [0.9, 0.99],
                "eps": 1e-8,
                "lr": 3e-3,
                "weight_decay": 0.1,
                "schedule": "cosine",
                "warmup_steps": 20,
                "min_lr": 3e-4,
                "label_smoothing": 0.0,
                "clip_norm": 1.0,
            },
            "run": {
                "dir": str(run_dir),
                "max_updates": max_updates,
                "log_every": 100,
                "valid_every": 150,
                "save_every": 150,
            },
        }
    )


@pytest.fixture(scope="module")
def trained_lm(tmp_path_factory):
    root = tmp_path_factory.mktemp("lm")
    (root / "text.txt").write_text(TEXT)
    prepare_lm(root / "text.txt", root / "data", valid_fraction=0.1)
    cfg = _lm_config(root, root / "run", max_updates=300)
    state = Trainer(cfg).train()
    return root, state


def test_a_language_model_resumes_on_its_own_data(trained_lm, tmp_path):
    root, _ = trained_lm
    shutil.copytree(root / "run", tmp_path / "run")
    cfg = _lm_config(root, tmp_path / "run", max_updates=302)
    assert Trainer(cfg, resume=True).train().update == 302


def test_a_tiny_lm_overfits_a_short_text(trained_lm):
    root, state = trained_lm
    assert state.best_valid < 0.3  # nats per character on text it has memorised
    model, _ = load_model(root / "run" / "best")
    assert isinstance(model, TransformerLM)


def test_generate_and_evaluate_commands(trained_lm, capsys, tmp_path):
    root, _ = trained_lm
    model_dir = str(root / "run" / "best")
    assert (
        main(
            [
                "generate",
                "--model",
                model_dir,
                "--prompt",
                "the quick",
                "--seed",
                "1",
                "--max-new-tokens",
                "30",
                "--temperature",
                "0",
            ]
        )
        == 0
    )
    out = capsys.readouterr().out
    assert out.startswith("the quick brown fox")
    (tmp_path / "t.txt").write_text(TEXT[:400])
    assert main(["evaluate", "--model", model_dir, "--text", str(tmp_path / "t.txt")]) == 0
    report = capsys.readouterr().out
    assert "perplexity" in report and "bits/character" in report
    assert float(report.split("perplexity ")[1].split(",")[0]) < 1.5


def test_lm_task_rejects_an_encoder(trained_lm, capsys, tmp_path):
    root, _ = trained_lm
    (tmp_path / "c.toml").write_text(
        f'task = "lm"\n[model]\npreset = "tiny"\n[data]\ndir = "{root / "data"}"\n'
        f'[run]\ndir = "{tmp_path / "r"}"\n'
    )
    assert main(["train", str(tmp_path / "c.toml")]) == 2
    assert "decoder-only" in capsys.readouterr().err
