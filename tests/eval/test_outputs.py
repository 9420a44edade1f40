"""Empty and degenerate translations are counted wherever a score is printed."""

import pytest

from aiayn.cli import main
from aiayn.eval import corpus_scores
from aiayn.eval.outputs import check_outputs, is_degenerate


@pytest.mark.parametrize(
    ("text", "degenerate"),
    [
        ("Ein WAAAAAAAAAAA", True),
        ("hahahahahahahaha", True),
        ("ein Hund ein Hund ein Hund ein Hund", True),
        ("Ein Mann ein Mann ein Mann.", False),
        ("Er fährt 100000000 km.", False),
        ("Ein Mann und ein Mann.", False),
        ("Sehr, sehr, sehr gut.", False),
    ],
)
def test_is_degenerate(text, degenerate):
    assert is_degenerate(text) is degenerate


def test_empty_counts_only_where_the_reference_is_not():
    check = check_outputs(["", "", "gut", "x x x x"], ["a", "", "b", "c"])
    assert (check.sentences, check.empty, check.degenerate) == (4, 1, 1)
    assert check.warning == "warning: 1 empty and 1 degenerate (looping) of 4 translations"
    assert not check.mostly_bad
    assert check_outputs(["a"], ["a"]).warning is None


def test_a_score_of_empty_translations_says_so():
    scores = corpus_scores(["", "", "Ein Hund."], ["Ein Mann.", "Eine Frau.", "Ein Hund."])
    assert scores.outputs.empty == 2 and scores.outputs.mostly_bad
    assert str(scores).splitlines()[-1] == "warning: 2 empty of 3 translations"


def test_evaluate_warns_about_empty_translations(tmp_path, capsys):
    (tmp_path / "ref.de").write_text("Ein Mann.\nEine Frau.\n")
    (tmp_path / "hyp.de").write_text("\nEine Frau.\n")
    assert (
        main(["evaluate", "--hyp", str(tmp_path / "hyp.de"), "--ref", str(tmp_path / "ref.de")])
        == 0
    )
    assert "warning: 1 empty of 2 translations" in capsys.readouterr().out
