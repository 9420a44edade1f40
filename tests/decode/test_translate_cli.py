"""``aiayn translate`` and ``aiayn evaluate`` on a model trained in the test."""

import json

import pytest
import torch

from aiayn.cli import build_parser, main
from aiayn.data import load_prepared
from aiayn.decode.beam import STOPPING
from aiayn.errors import ConfigError
from aiayn.runtime import resolve_precision
from aiayn.train import Trainer
from aiayn.translate.translator import SearchOptions, TranslationError, Translator

from ..train.conftest import tiny_train_config


@pytest.fixture
def model_dir(trained_model_dir):
    return trained_model_dir


def _lines(path):
    return path.read_text(encoding="utf-8").split("\n")[:-1]


def test_translate_keeps_order_and_handles_empty_and_unknown(model_dir, tmp_path, capsys):
    inputs = ["the dog runs", "", "a big red ball near the tree", "🐕 dog ☃", "cat", ""]
    (tmp_path / "in.txt").write_text("\n".join(inputs) + "\n", encoding="utf-8")
    out = tmp_path / "out.txt"
    assert (
        main(
            [
                "translate",
                "--model",
                str(model_dir),
                "-i",
                str(tmp_path / "in.txt"),
                "-o",
                str(out),
                "--beam",
                "3",
                "--batch-tokens",
                "16",
            ]
        )
        == 0
    )
    lines = _lines(out)
    assert len(lines) == len(inputs)
    assert lines[1] == "" and lines[5] == ""
    assert all(lines[i] for i in (0, 2, 3, 4))
    translator = Translator.from_dir(model_dir)
    for i in (0, 2, 4):  # each line alone gives the same as inside the batches
        alone = translator.translate([inputs[i]], SearchOptions(beam=3))[0][0].text
        assert alone == lines[i]


def test_over_long_lines_are_truncated_with_a_warning_or_refused(model_dir, tmp_path, capsys):
    (tmp_path / "in.txt").write_text("the dog runs on the big red house\n")
    args = [
        "translate",
        "--model",
        str(model_dir),
        "-i",
        str(tmp_path / "in.txt"),
        "--max-src-len",
        "4",
    ]
    assert main(args) == 0
    captured = capsys.readouterr()
    assert "line 1:" in captured.err and "truncated to 3" in captured.err
    assert main([*args, "--on-long", "error"]) == 2
    assert "aiayn translate: error: line 1" in capsys.readouterr().err


@pytest.mark.parametrize(("bfloat16_hardware", "warned"), [(False, True), (True, False)])
def test_bf16_decoding_warns_where_it_is_emulated_and_auto_avoids_it(
    model_dir, tmp_path, capsys, monkeypatch, bfloat16_hardware, warned
):
    monkeypatch.setattr(torch.cpu, "_is_avx512_bf16_supported", lambda: bfloat16_hardware)
    monkeypatch.setattr(torch.cpu, "_is_amx_tile_supported", lambda: False)
    monkeypatch.setattr(torch.backends.cpu, "get_cpu_capability", lambda: "AVX512")
    monkeypatch.delenv("ONEDNN_MAX_CPU_ISA", raising=False)
    (tmp_path / "in.txt").write_text("the dog runs\n")
    args = ["translate", "--model", str(model_dir), "-i", str(tmp_path / "in.txt"), "--beam", "2"]
    outputs = {}
    for precision in ("bf16", "auto", "fp32"):
        assert main([*args, "--precision", precision]) == 0
        captured = capsys.readouterr()
        outputs[precision] = captured.out
        assert ("emulated" in captured.err) == (warned and precision == "bf16")
    assert outputs["auto"] == outputs["bf16" if bfloat16_hardware else "fp32"]


def test_nbest_lines_have_scores_best_first(model_dir, tmp_path, capsys):
    (tmp_path / "in.txt").write_text("the dog\nthe cat sleeps\n")
    assert (
        main(
            [
                "translate",
                "--model",
                str(model_dir),
                "-i",
                str(tmp_path / "in.txt"),
                "--beam",
                "4",
                "--nbest",
                "3",
            ]
        )
        == 0
    )
    rows = [line.split(" ||| ") for line in capsys.readouterr().out.splitlines()]
    assert [r[0] for r in rows] == ["0", "0", "0", "1", "1", "1"]
    scores = [float(r[2]) for r in rows[:3]]
    assert scores == sorted(scores, reverse=True)


def test_translate_with_reference_prints_bleu_and_chrf(model_dir, tiny_dataset, tmp_path, capsys):
    data = load_prepared(tiny_dataset)
    test = data.split("test")
    src = [data.src_tokenizer.decode(test.src[i].tolist()) for i in range(len(test))]
    ref = [data.tgt_tokenizer.decode(test.tgt[i].tolist()) for i in range(len(test))]
    (tmp_path / "src").write_text("\n".join(src) + "\n")
    (tmp_path / "ref").write_text("\n".join(ref) + "\n")
    assert (
        main(
            [
                "translate",
                "--model",
                str(model_dir),
                "-i",
                str(tmp_path / "src"),
                "-o",
                str(tmp_path / "hyp"),
                "--ref",
                str(tmp_path / "ref"),
            ]
        )
        == 0
    )
    err = capsys.readouterr().err
    assert "BLEU" in err and "nrefs:1" in err and "chrF" in err
    assert (
        main(
            [
                "evaluate",
                "--hyp",
                str(tmp_path / "hyp"),
                "--ref",
                str(tmp_path / "ref"),
                "--tokenized",
            ]
        )
        == 0
    )
    out = capsys.readouterr().out
    assert "tok:none" in out
    assert float(out.split()[1]) > 0


def test_evaluate_rejects_mismatched_files(tmp_path, capsys):
    (tmp_path / "h").write_text("a\nb\n")
    (tmp_path / "r").write_text("a\n")
    assert main(["evaluate", "--hyp", str(tmp_path / "h"), "--ref", str(tmp_path / "r")]) == 2
    assert "has 1 lines" in capsys.readouterr().err


@pytest.mark.parametrize(
    "options",
    [
        [],
        ["--beam", "3", "--alpha", "0", "--batch-tokens", "512", "--precision", "bf16"],
        ["--stopping", "heuristic"],
    ],
)
def test_translate_and_serve_read_search_options_alike(options):
    """Both commands take the decoding options the same way; their defaults are the
    library's (``SearchOptions``)."""
    parser = build_parser()
    shared = ("beam", "alpha", "batch_tokens", "precision", "stopping", "device")
    translate = vars(parser.parse_args(["translate", "--model", "m", *options]))
    serve = vars(parser.parse_args(["serve", "--model", "m", *options]))
    assert {k: translate[k] for k in shared} == {k: serve[k] for k in shared}
    if not options:
        defaults = SearchOptions()
        assert (translate["beam"], translate["alpha"], translate["precision"]) == (
            defaults.beam,
            defaults.alpha,
            defaults.precision,
        )
        assert translate["batch_tokens"] == defaults.batch_tokens
        assert translate["stopping"] == defaults.stopping


def test_greedy_and_beam_options(model_dir):
    translator = Translator.from_dir(model_dir)
    [[greedy]] = translator.translate(["the dog"], SearchOptions(beam=1))
    assert greedy.text
    [[beam_bf16]] = translator.translate(["the dog"], SearchOptions(precision="bf16"))
    assert beam_bf16.text
    [[beam_int8]] = translator.translate(["the dog"], SearchOptions(precision="int8"))
    assert beam_int8.text
    for stopping in STOPPING:
        [[stopped]] = translator.translate(["the dog"], SearchOptions(stopping=stopping))
        assert stopped.text
    with pytest.raises(TranslationError):
        translator.translate(["a b c d e f"], SearchOptions(max_src_len=3, on_long="error"))
    with pytest.raises(ConfigError, match="precision must be one of fp32, bf16, int8, auto"):
        SearchOptions(precision="fp16")  # never decoded silently in float32
    [[auto]] = translator.translate(["the dog"], SearchOptions(precision="auto"))
    resolved = resolve_precision("auto", translator.device)
    assert auto == translator.translate(["the dog"], SearchOptions(precision=resolved))[0][0]


def test_a_translator_follows_changes_to_its_weights(model_dir):
    """The packed stepper a translator keeps is rebuilt after it is told that the weights
    changed in place."""
    translator = Translator.from_dir(model_dir)
    lines = ["the dog runs", "a man"]
    options = SearchOptions(beam=1)
    translator.translate(lines, options)
    with torch.no_grad():
        for p in translator.model.decoder.parameters():
            p.mul_(-1.5)
    translator.weights_changed()
    fresh = Translator(translator.model, translator.src_tokenizer, translator.tgt_tokenizer)
    assert translator.translate(lines, options) == fresh.translate(lines, options)
    first = translator._stepper("fp32")
    assert translator._stepper("fp32") is first  # kept while nothing changes


def test_training_can_validate_with_bleu(tiny_dataset, tmp_path):
    from aiayn.validation import bleu_validator

    cfg = tiny_train_config(
        tiny_dataset, tmp_path / "r", run={"max_updates": 6, "valid_bleu": True}
    )
    Trainer(cfg, validators=[bleu_validator(cfg)]).train()
    rows = [json.loads(x) for x in (tmp_path / "r" / "metrics.jsonl").open()]
    assert all("bleu" in r and "chrf" in r for r in rows if r["kind"] == "valid")
    signatures = (tmp_path / "r" / "valid_signatures.txt").read_text().splitlines()
    assert signatures[0].startswith("BLEU nrefs:1|") and "|tok:13a|" in signatures[0]
    assert signatures[1].startswith("chrF nrefs:1|")


def test_validation_decodes_through_the_training_weights(tiny_dataset, tmp_path, monkeypatch):
    """No packed copy per validation: its oneDNN kernels would stay in the trainer's heap."""
    from aiayn.accel import stepper
    from aiayn.validation import bleu_validator

    def refuse(*args, **kwargs):
        raise AssertionError("validation packed a copy of the training model")

    monkeypatch.setattr(stepper, "packed_for_decoding", refuse)
    cfg = tiny_train_config(
        tiny_dataset, tmp_path / "r", run={"max_updates": 2, "valid_bleu": True}
    )
    Trainer(cfg, validators=[bleu_validator(cfg)]).train()


def test_a_warning_names_the_input_line_and_its_sentence(model_dir):
    """Warnings count the caller's lines, not the sentences they were split into."""
    warned: list[str] = []
    translator = Translator.from_dir(model_dir)
    long = "a b c d e f g h i j k l m n o p"
    lines = ["", f"Go. {long.capitalize()}.", long]
    translator.translate(lines, SearchOptions(beam=1, max_src_len=12), warn=warned.append)
    assert [w.split(":")[0] for w in warned] == ["line 2, sentence 2", "line 3"]
