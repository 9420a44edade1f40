"""``aiayn translate`` with --scores, --min-confidence, --glossary and --protect."""

import pytest

from aiayn.cli import main

LINES = ["the dog runs on the street .", "a small cat sleeps under the big tree"]


@pytest.fixture
def source(tmp_path):
    path = tmp_path / "in.txt"
    path.write_text("\n".join(LINES) + "\n", encoding="utf-8")
    return path


def _translate(model, source, *options):
    return main(["translate", "--model", str(model), "-i", str(source), "--beam", "3", *options])


def test_scores_put_each_lines_confidence_before_it(trained_model_dir, source, capsys):
    assert _translate(trained_model_dir, source, "--scores") == 0
    rows = [line.split("\t") for line in capsys.readouterr().out.splitlines()]
    assert len(rows) == 2 and all(len(r) == 2 and 0 < float(r[0]) <= 1 for r in rows)


def test_below_min_confidence_the_source_comes_back_and_is_said(trained_model_dir, source, capsys):
    assert _translate(trained_model_dir, source, "--min-confidence", "1") == 0
    captured = capsys.readouterr()
    assert captured.out.splitlines() == LINES
    assert "line 2: confidence" in captured.err and "the source is given back" in captured.err


def test_a_glossary_file_imposes_its_term(trained_model_dir, source, tmp_path, capsys):
    glossary = tmp_path / "g.tsv"
    glossary.write_text("dog\thouse\n", encoding="utf-8")
    assert _translate(trained_model_dir, source, "--glossary", str(glossary)) == 0
    assert "house" in capsys.readouterr().out.splitlines()[0].lower()


def test_a_user_pattern_and_no_protect(trained_model_dir, tmp_path, capsys):
    path = tmp_path / "in.txt"
    path.write_text("the dog ACME-42 runs\n", encoding="utf-8")
    assert _translate(trained_model_dir, path, "--protect", r"ACME-\d+") == 0
    assert capsys.readouterr().out.count("ACME-42") == 1
    path.write_text("the {{dog runs\n", encoding="utf-8")
    assert _translate(trained_model_dir, path, "--no-protect") == 0


@pytest.mark.parametrize(
    "options, content, message",
    [
        (
            ["--min-confidence", "1.5"],
            None,
            "--min-confidence: must be a number from 0 to 1, got 1.5",
        ),
        (["--min-confidence", "x"], None, "--min-confidence: must be a number"),
        (["--min-confidence", "-0.1"], None, "--min-confidence: must be a number from 0 to 1"),
        (["--min-confidence", "nan"], None, "--min-confidence: must be a number from 0 to 1"),
        (["--glossary", "{dir}/missing.tsv"], None, "missing.tsv: cannot read the glossary"),
        (["--protect", "(ab"], None, "protect pattern '(ab' does not compile"),
        (["--glossary", "{dir}/empty.tsv"], None, "empty.tsv: no terms"),
        (["--glossary", "{dir}/bad.tsv"], None, "bad.tsv: line 1: expected"),
        ([], "the {{dog runs", "line 1: unbalanced placeholder '{{'"),
    ],
)
def test_bad_values_are_one_line_and_exit_2(
    trained_model_dir, tmp_path, capsys, options, content, message
):
    (tmp_path / "empty.tsv").write_text("")
    (tmp_path / "bad.tsv").write_text("only one field\n")
    path = tmp_path / "in.txt"
    path.write_text(f"{content or 'the dog'}\n", encoding="utf-8")
    options = [o.replace("{dir}", str(tmp_path)) for o in options]
    try:
        status = _translate(trained_model_dir, path, *options)
    except SystemExit as e:  # argparse's own errors
        status = e.code
    err = capsys.readouterr().err.strip().splitlines()
    assert status == 2
    assert len(err) == 1 and message in err[0] and "Traceback" not in err[0]


@pytest.mark.parametrize("beam", ["1", "2"])
def test_adjacent_placeholders_come_back_whole_and_in_order(
    trained_model_dir, tmp_path, beam, capsys
):
    """Format strings survive: ``%s%d`` and ``{count}{unit}`` come back as they were, in
    their order, whatever the model does with their stand-in."""
    source = tmp_path / "in.txt"
    source.write_text(
        "the dog found %s%d bones in the park .\ntotal : {count}{unit} for the dog .\n",
        encoding="utf-8",
    )
    argv = ["translate", "--model", str(trained_model_dir), "-i", str(source), "--beam", beam]
    assert main(argv) == 0
    first, second = capsys.readouterr().out.splitlines()
    assert "%s%d" in first and "{count}{unit}" in second


def test_an_empty_protect_pattern_names_the_option_a_user_gave(trained_model_dir, source, capsys):
    assert _translate(trained_model_dir, source, "--protect", "") == 2
    err = capsys.readouterr().err
    assert "--protect " in err and "--protect-patterns" not in err


def test_a_glossary_with_a_byte_order_mark_keeps_its_first_term(tmp_path):
    from aiayn.text.glossary import read_glossary

    path = tmp_path / "bom.tsv"
    path.write_bytes("\ufeffdog\tHund\n# a comment\ncat\tKatze\n".encode())
    assert {(t.source, t.target) for t in read_glossary(path).terms} == {
        ("dog", "Hund"),
        ("cat", "Katze"),
    }


def test_a_term_inside_a_protected_span_is_not_imposed_and_no_target_is_a_sentinel():
    from aiayn.text.glossary import Glossary
    from aiayn.translate.terms import mark

    glossary = Glossary.from_pairs([("dog", "K"), ("park", "Park")])
    (inside,) = mark(
        ["see https://example.org/park now"],
        ["line 1"],
        protect=True,
        patterns=(),
        glossary=glossary,
    )
    assert inside.terms == ()  # park only in the URL
    (both,) = mark(
        ["the dog at https://example.org/x"],
        ["line 1"],
        protect=True,
        patterns=(),
        glossary=glossary,
    )
    assert [t.target for t in both.terms] == ["K"]
    assert all(span.sentinel != "K" for span in both.masked.spans)


def test_text_raw_says_it_does_not_use_a_glossary(trained_model_dir, source, tmp_path, capsys):
    glossary = tmp_path / "g.tsv"
    glossary.write_text("dog\thouse\n", encoding="utf-8")
    assert _translate(trained_model_dir, source, "--text", "raw", "--glossary", str(glossary)) == 0
    assert "--glossary and --protect apply to natural text only" in capsys.readouterr().err
