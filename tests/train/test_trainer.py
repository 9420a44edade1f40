import contextlib
import json
import math
import shutil

import numpy as np
import pytest
import torch
from safetensors.torch import load_file

import aiayn.train.state
from aiayn.cli import main
from aiayn.config import PAD_ID, PrepareConfig
from aiayn.config_io import train_config_from_dict
from aiayn.data import Batch, collate, load_prepared, prepare
from aiayn.data.corpus import MANIFEST
from aiayn.errors import ConfigError
from aiayn.runtime import emulated_bfloat16_warning
from aiayn.store import load_model
from aiayn.train import Trainer, TrainingError, list_checkpoints
from aiayn.train.checkpoint import checkpoint_progress
from aiayn.train.collective import autocast
from aiayn.train.run_dir import RunDirectoryError
from aiayn.train.state import UpdateResult, Window

from ..test_runtime import hold_cpu
from .conftest import Messages, config_dict, tiny_train_config, write_toml


def test_training_reduces_loss_and_writes_the_run(tiny_dataset, tmp_path):
    cfg = tiny_train_config(tiny_dataset, tmp_path / "run", run={"max_updates": 24})
    state = Trainer(cfg).train()
    assert state.update == 24
    rows = [json.loads(line) for line in (tmp_path / "run" / "metrics.jsonl").open()]
    train = [r for r in rows if r["kind"] == "train"]
    assert train[-1]["loss"] < train[0]["loss"]
    assert {"loss", "nll", "ppl", "lr", "tokens_per_s", "rss_mb", "peak_rss_mb"} <= set(train[0])
    assert all(0 < r["rss_mb"] <= r["peak_rss_mb"] for r in train)
    assert [r["update"] for r in rows if r["kind"] == "valid"] == [6, 12, 18, 24]
    assert [p.name for p in list_checkpoints(tmp_path / "run")][-1] == "step_00000024"
    assert json.loads((tmp_path / "run" / "config.json").read_text())["run"]["max_updates"] == 24
    assert any((tmp_path / "run" / "tensorboard").iterdir())
    model, _ = load_model(tmp_path / "run" / "best")
    assert (tmp_path / "run" / "best" / "tokenizer.json").is_file()
    assert model.output.proj.weight.shape[0] == 60


def test_free_heap_is_handed_back_after_each_update_that_meets_a_new_batch_shape(
    tiny_dataset, tmp_path, monkeypatch
):
    releases: list[int] = []
    shapes: list[tuple] = []
    cfg = tiny_train_config(
        tiny_dataset, tmp_path / "run", run={"max_updates": 30, "valid_every": 1000}
    )
    trainer = Trainer(cfg, release_memory=lambda: releases.append(len(shapes)))
    next_batch = trainer.task.next_batch

    def recorded():
        batch = next_batch()
        shapes.append(tuple(t.shape for t in batch.model_inputs))
        return batch

    trainer.task.next_batch = recorded
    trainer.train()
    first_meetings = [i + 1 for i, s in enumerate(shapes) if s not in shapes[:i]]
    assert 1 < len(first_meetings) < len(shapes)  # the test sees new and known shapes
    assert releases[: len(first_meetings)] == first_meetings  # then validation's own two
    assert len(releases) == len(first_meetings) + 2


def test_window_speed_leaves_out_validation_and_checkpoint_time(monkeypatch):
    clock = iter([100.0, 110.0])
    monkeypatch.setattr("aiayn.train.state.time.perf_counter", lambda: next(clock))
    window = Window()  # starts at 100 s
    window.add(UpdateResult(loss_sum=2.0, nll_sum=1.0, tokens=500, finite=True))
    window.excluded = 5.0  # validated for 5 of its 10 s
    assert window.summary()["tokens_per_s"] == pytest.approx(100.0)


def test_keep_last_and_no_leftover_temporary_checkpoints(tiny_dataset, tmp_path):
    cfg = tiny_train_config(
        tiny_dataset, tmp_path / "run", run={"max_updates": 12, "save_every": 2, "keep_last": 3}
    )
    Trainer(cfg).train()
    names = [p.name for p in (tmp_path / "run" / "checkpoints").iterdir()]
    assert sorted(names) == ["step_00000008", "step_00000010", "step_00000012"]


def _gradients_of_one_update(trainer: Trainer, batches: list[Batch]) -> dict[str, torch.Tensor]:
    """The gradients the optimiser receives in one update fed ``batches``."""
    feed = iter(batches)
    trainer.task.next_batch = lambda: next(feed)
    grads = {}

    def capture(optimizer):
        grads.update({n: p.grad.clone() for n, p in trainer.model.named_parameters()})

    trainer.scaler.step = capture
    trainer._update()
    return grads


def _merge(a: Batch, b: Batch) -> Batch:
    def cat(x, y):
        width = max(x.size(1), y.size(1))
        pad = lambda t: torch.nn.functional.pad(t, (0, width - t.size(1)))  # noqa: E731
        return torch.cat([pad(x), pad(y)])

    return Batch(
        cat(a.src, b.src),
        cat(a.tgt_in, b.tgt_in),
        cat(a.tgt_out, b.tgt_out),
        np.concatenate([a.indices, b.indices]),
    )


def test_accumulating_two_batches_equals_one_batch_twice_as_large(tiny_dataset, tmp_path):
    model = {"dropout": 0.0}
    accumulate = Trainer(
        tiny_train_config(tiny_dataset, tmp_path / "a", model=model, optim={"update_freq": 2})
    )
    b1, b2 = accumulate.task.next_batch(), accumulate.task.next_batch()
    large = Trainer(tiny_train_config(tiny_dataset, tmp_path / "b", model=model))
    accumulated = _gradients_of_one_update(accumulate, [b1, b2])
    large_batch = _gradients_of_one_update(large, [_merge(b1, b2)])
    for name, grad in large_batch.items():
        torch.testing.assert_close(accumulated[name], grad, rtol=1e-4, atol=1e-7)


def test_nonfinite_losses_are_skipped_then_stop_the_run(tiny_dataset, tmp_path):
    trainer = Trainer(
        tiny_train_config(tiny_dataset, tmp_path / "r", run={"max_nonfinite": 3, "max_updates": 20})
    )
    real = trainer.forward_model
    poisoned = {2, 5, 6, 7}

    def maybe_nan(src, tgt_in, tgt_out):
        loss, nll = real(src, tgt_in, tgt_out)
        if trainer.state.update + 1 in poisoned:
            loss = loss * float("nan")
        return loss, nll

    trainer.forward_model = maybe_nan
    before = {k: v.clone() for k, v in trainer.model.state_dict().items()}
    trainer._update()
    trainer._update()  # update 2: NaN, skipped
    assert trainer.state.nonfinite_total == 1 and trainer.state.update == 2
    assert all(torch.isfinite(p).all() for p in trainer.model.parameters())
    assert any(not torch.equal(before[k], v) for k, v in trainer.model.state_dict().items())
    with pytest.raises(TrainingError, match="3 non-finite losses in a row"):
        trainer.train()


@pytest.mark.isa
def test_bf16_autocast_trains(tiny_dataset, tmp_path):
    cfg = tiny_train_config(
        tiny_dataset, tmp_path / "r", run={"precision": "bf16", "max_updates": 6}
    )
    messages = Messages()
    state = Trainer(cfg, reporter=messages).train()
    assert state.best_valid is not None and math.isfinite(state.best_valid)
    emulated = emulated_bfloat16_warning("bf16", torch.device("cpu")) is not None
    assert any("emulated" in m for m in messages.lines) == emulated  # warned only where it is


@pytest.mark.isa
def test_auto_precision_trains_in_what_the_hardware_has(tiny_dataset, tmp_path, monkeypatch):
    """``auto`` autocasts to bf16 only where bfloat16 is computed in hardware; explicit bf16
    on emulating hardware trains as asked, with a warning. The hardware is patched in, both
    ways, whatever CPU runs the test: its flags, ATen's kernels, oneDNN's limit."""
    hold_cpu(monkeypatch, avx512_bf16=False, aten="AVX2")
    auto = Trainer(tiny_train_config(tiny_dataset, tmp_path / "a", run={"precision": "auto"}))
    explicit = Trainer(tiny_train_config(tiny_dataset, tmp_path / "b", run={"precision": "bf16"}))
    try:
        assert auto.precision == "fp32" and explicit.precision == "bf16"
        assert isinstance(autocast(auto.precision, auto.device), contextlib.nullcontext)
    finally:
        auto.close()
        explicit.close()
    hold_cpu(monkeypatch, avx512_bf16=True)
    native = Trainer(tiny_train_config(tiny_dataset, tmp_path / "c", run={"precision": "auto"}))
    try:
        assert native.precision == "bf16"
    finally:
        native.close()


def test_existing_run_needs_resume(tiny_dataset, tmp_path):
    cfg = tiny_train_config(tiny_dataset, tmp_path / "r", run={"max_updates": 6})
    Trainer(cfg).train()
    with pytest.raises(TrainingError, match="--resume"):
        Trainer(cfg)


def test_average_of_checkpoints_is_the_mean(tiny_dataset, tmp_path, capsys):
    cfg = tiny_train_config(
        tiny_dataset, tmp_path / "r", run={"max_updates": 12, "save_every": 4, "keep_last": 3}
    )
    Trainer(cfg).train()
    ckpts = list_checkpoints(tmp_path / "r")
    assert (
        main(["average", str(tmp_path / "r"), "--last", "2", "--out", str(tmp_path / "avg")]) == 0
    )
    assert "averaged 2 checkpoints" in capsys.readouterr().out
    a, b = (load_file(str(p / "model.safetensors")) for p in ckpts[-2:])
    avg = load_file(str(tmp_path / "avg" / "model.safetensors"))
    for name in avg:
        torch.testing.assert_close(avg[name], (a[name].double() + b[name].double()).div(2).float())
    assert (tmp_path / "avg" / "tokenizer.json").is_file()


@pytest.mark.parametrize(
    ("override", "message"),
    [
        ("optim.lr=fast", "expected float"),
        ("optim.learning_rate=0.1", "unknown key"),
        ('run.precision="fp8"', "not one of"),
        ('model.preset="huge"', "unknown preset"),
        ("model.d_model=30", "divisible"),
    ],
)
def test_config_errors_are_clear(tiny_dataset, tmp_path, capsys, override, message):
    path = write_toml(tmp_path / "c.toml", config_dict(tiny_dataset, tmp_path / "r"))
    assert main(["train", str(path), "--set", override]) == 2
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err


def test_toml_presets_and_overrides(tiny_dataset, tmp_path):
    values = config_dict(tiny_dataset, tmp_path / "r")
    values["model"] = {"preset": "tiny", "dropout": 0.2}
    cfg = train_config_from_dict(values)
    assert (cfg.model.d_model, cfg.model.n_encoder_layers, cfg.model.dropout) == (128, 4, 0.2)
    with pytest.raises(ConfigError, match="unknown key"):
        train_config_from_dict({**values, "extra": {}})


def _updates_logged(run_dir):
    rows = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    return [r["update"] for r in rows if r["kind"] == "train"]


def test_a_resumed_run_never_logs_an_update_twice(tiny_dataset, tmp_path):
    run = {"max_updates": 8, "log_every": 1, "save_every": 4, "valid_every": 100}
    Trainer(tiny_train_config(tiny_dataset, tmp_path / "run", run=run)).train()
    shutil.rmtree(list_checkpoints(tmp_path / "run")[-1])  # as if killed after update 7
    Trainer(tiny_train_config(tiny_dataset, tmp_path / "run", run=run), resume=True).train()
    assert _updates_logged(tmp_path / "run") == list(range(1, 9))


def test_a_fresh_run_never_appends_to_an_old_log(tiny_dataset, tmp_path):
    run = {"max_updates": 4, "log_every": 1, "save_every": 4, "valid_every": 100}
    Trainer(tiny_train_config(tiny_dataset, tmp_path / "run", run=run)).train()
    shutil.rmtree(tmp_path / "run" / "checkpoints")
    Trainer(tiny_train_config(tiny_dataset, tmp_path / "run", run=run)).train()
    assert _updates_logged(tmp_path / "run") == [1, 2, 3, 4]


@pytest.mark.parametrize("profile", ["reference", "fast"])
def test_padding_widths_to_a_multiple_leaves_the_losses_unchanged(
    tiny_dataset, tmp_path, profile, monkeypatch
):
    import aiayn.data.batching as batching

    widths: list[int] = []

    def spy(*args, **kwargs):
        batch = collate(*args, **kwargs)
        widths.extend((batch.src.shape[1], batch.tgt_in.shape[1]))
        return batch

    monkeypatch.setattr(batching, "collate", spy)

    def losses(multiple: int) -> list[float]:
        widths.clear()
        cfg = tiny_train_config(
            tiny_dataset,
            tmp_path / f"run{multiple}",
            model={"dropout": 0.0},  # dropout draws depend on the tensors' shapes
            # batches cut by sentence count, so that rounding (counted in max_tokens)
            # leaves them the same
            data={"pad_to_multiple": multiple, "max_tokens": 1 << 20, "max_sentences": 24},
            run={"max_updates": 8, "log_every": 1, "profile": profile},
        )
        Trainer(cfg).train()
        rows = [json.loads(line) for line in (tmp_path / f"run{multiple}" / "metrics.jsonl").open()]
        return [r["loss"] for r in rows]

    plain = losses(1)
    assert any(w % 8 for w in widths)
    rounded = losses(8)
    assert widths and all(w % 8 == 0 for w in widths)  # the training batches were rounded
    assert len(plain) == 8 + 2  # every update, and the validations at 6 and 8
    assert rounded == pytest.approx(plain, rel=1e-4)


def test_batches_padded_to_a_multiple(tiny_dataset):
    split = load_prepared(tiny_dataset).split("train")
    indices = np.arange(7)
    plain, rounded = collate(split, indices), collate(split, indices, pad_to_multiple=8)
    for a, b in zip(plain.model_inputs, rounded.model_inputs, strict=True):
        assert b.shape[1] % 8 == 0 and b.shape[1] >= a.shape[1]
        assert torch.equal(b[:, : a.shape[1]], a)
        assert (b[:, a.shape[1] :] == PAD_ID).all()


def _prepared_again(dataset, directory, **changes):
    """``dataset`` prepared again into ``directory`` with some options changed."""
    options = json.loads((dataset / MANIFEST).read_text())["options"]
    prepare(PrepareConfig(**{**options, "test": tuple(options["test"]), **changes}), directory)
    return directory


def test_resume_refuses_another_architecture(tiny_dataset, tmp_path):
    Trainer(tiny_train_config(tiny_dataset, tmp_path / "run", run={"max_updates": 2})).train()
    cfg = tiny_train_config(tiny_dataset, tmp_path / "run", model={"d_ff": 48})
    with pytest.raises(RunDirectoryError, match=r"model\.d_ff = 64, the config now says 48"):
        Trainer(cfg, resume=True)


def test_a_run_scored_by_bleu_resumes(tiny_dataset, tmp_path):
    """The validation's signatures file is the run's own: a resume does not take the run
    directory for someone else's."""
    from aiayn.validation import SIGNATURES_FILE, validators_for

    run = {"max_updates": 2, "valid_every": 2, "save_every": 2, "valid_bleu": True}
    cfg = tiny_train_config(tiny_dataset, tmp_path / "run", run=run)
    Trainer(cfg, validators=validators_for(cfg)).train()
    assert (tmp_path / "run" / SIGNATURES_FILE).is_file()
    more = tiny_train_config(tiny_dataset, tmp_path / "run", run={**run, "max_updates": 4})
    assert Trainer(more, resume=True, validators=validators_for(more)).train().update == 4
    (tmp_path / "run" / "notes.txt").write_text("mine")
    with pytest.raises(RunDirectoryError, match=r"did not write \(notes\.txt\)"):
        Trainer(more, resume=True)


def test_resume_refuses_data_of_another_vocabulary_of_the_same_size(tiny_dataset, tmp_path):
    """Same sizes, so the same architecture: only the pieces tell the data apart."""
    Trainer(tiny_train_config(tiny_dataset, tmp_path / "run", run={"max_updates": 2})).train()
    other = _prepared_again(tiny_dataset, tmp_path / "fewer", vocab_sample=200)
    before = list_checkpoints(tmp_path / "run")
    with pytest.raises(RunDirectoryError, match="another source vocabulary"):
        Trainer(tiny_train_config(other, tmp_path / "run", run={"max_updates": 4}), resume=True)
    assert list_checkpoints(tmp_path / "run") == before


def test_resume_accepts_the_same_data_prepared_again(tiny_dataset, tmp_path):
    Trainer(tiny_train_config(tiny_dataset, tmp_path / "run", run={"max_updates": 2})).train()
    again = _prepared_again(tiny_dataset, tmp_path / "again")
    cfg = tiny_train_config(again, tmp_path / "run", run={"max_updates": 4})
    assert Trainer(cfg, resume=True).train().update == 4


def test_a_library_trainer_logs_its_news_and_prints_nothing(tiny_dataset, tmp_path, caplog, capsys):
    """Without a reporter, news goes to the ``aiayn`` logger (the CLI shows it)."""
    cfg = tiny_train_config(tiny_dataset, tmp_path / "run", run={"max_updates": 2})
    with caplog.at_level("INFO", logger="aiayn"):
        Trainer(cfg).train()
    assert any("parameters" in r.getMessage() for r in caplog.records if r.name == "aiayn")
    assert capsys.readouterr() == ("", "")


class _Clock:
    """A training clock that advances ``tick`` seconds each time it is read."""

    def __init__(self, tick: float):
        self.now, self.tick = 0.0, tick

    def perf_counter(self) -> float:
        self.now += self.tick
        return self.now


def test_the_budget_schedule_ends_annealed_when_the_clock_runs_out(
    tiny_dataset, tmp_path, monkeypatch
):
    """Under ``schedule = "budget"`` a run that its time budget stops is annealed by then:
    its learning rate reaches min_lr at the budget's end, not at max_updates; the planned end
    is logged from the first report; the checkpoints record their progress."""
    monkeypatch.setattr(aiayn.train.state, "time", _Clock(tick=0.5))  # read once an update
    cfg = tiny_train_config(
        tiny_dataset,
        tmp_path / "r",
        optim={"schedule": "budget", "lr": 0.003, "warmup_steps": 4, "min_lr": 1e-5},
        run={"max_updates": 1000, "max_minutes": 0.25, "valid_every": 1000, "save_every": 4},
    )
    messages = Messages()
    state = Trainer(cfg, reporter=messages).train()
    assert 20 <= state.update < 1000  # the clock stopped it: about 30 reads of 0.5 s
    assert any(m.startswith("planned end: update ") and "budget ends it" in m for m in messages)
    rows = [json.loads(line) for line in (tmp_path / "r" / "metrics.jsonl").open()]
    lrs = [r["lr"] for r in rows if r["kind"] == "train"]
    assert max(lrs) > 10 * lrs[-1] and lrs[-1] < 0.003 * 0.15
    progress = [checkpoint_progress(c) for c in list_checkpoints(tmp_path / "r")]
    assert progress == sorted(progress) and progress[-1] > 0.9
