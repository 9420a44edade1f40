"""BLEU tokenised for the target language: the same scores and signatures as sacreBLEU's own
command on the same files, ko-mecab for Korean by default, and no silent fallback to 13a."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import sacrebleu.tokenizers.tokenizer_ko_mecab as ko_mecab

from aiayn.cli import main
from aiayn.data import read_lines
from aiayn.eval import ScoringError, bleu_tokenizer, corpus_scores, language_code


def _korean_pair(seedpairs_dir: Path, tmp_path: Path, n: int = 60) -> tuple[Path, Path]:
    """References from FLORES-200 devtest (Korean) and hypotheses that differ from them:
    words dropped, and every fourth line taken from the next sentence."""
    refs = list(read_lines(seedpairs_dir / "flores200" / "devtest.ko.gz"))[:n]
    hyps = []
    for i, ref in enumerate(refs):
        words = ref.split()
        if i % 4 == 3:
            hyps.append(refs[(i + 1) % n])
        else:
            hyps.append(" ".join(w for j, w in enumerate(words) if j % (2 + i % 3)))
    (tmp_path / "ref.ko").write_text("".join(r + "\n" for r in refs), encoding="utf-8")
    (tmp_path / "hyp.ko").write_text("".join(h + "\n" for h in hyps), encoding="utf-8")
    return tmp_path / "hyp.ko", tmp_path / "ref.ko"


def _sacrebleu(ref: Path, hyp: Path, *options: str) -> dict[str, dict]:
    """sacreBLEU's command: its BLEU and chrF, scores to 6 decimals, by metric name."""
    command = [sys.executable, "-m", "sacrebleu", str(ref), "-i", str(hyp), "-w", "6"]
    out = subprocess.run(
        [*command, "-m", "bleu", "chrf", *options], check=True, capture_output=True, text=True
    ).stdout
    return {row["name"]: row for row in json.loads(out)}


@pytest.mark.parametrize(
    ("lang", "tokenizer"),
    [
        ("ko", "ko-mecab"),
        ("ko_KR", "ko-mecab"),
        ("kor_Hang", "ko-mecab"),
        ("ja", "ja-mecab"),
        ("zh-CN", "zh"),
        ("zho_Hans", "zh"),
        ("en", "13a"),
        ("pt", "13a"),
        ("", "13a"),
    ],
)
def test_the_target_language_chooses_the_tokenizer(lang, tokenizer):
    assert bleu_tokenizer(lang) == tokenizer
    assert bleu_tokenizer(lang, "char") == "char"  # an explicit choice wins


def test_language_codes_reduce_to_sacrebleus():
    assert [language_code(c) for c in ("KO", "ko-KR", "kor", "jpn_Jpan", "pt_BR")] == [
        "ko",
        "ko",
        "ko",
        "ja",
        "pt",
    ]


@pytest.mark.parametrize(
    ("lang", "code"),
    [
        ("en-ko", "ko"),  # sacreBLEU's SRC-TGT: the target's tokenizer, never the source's
        ("de-zh", "zh"),
        ("en-ja", "ja"),
        ("ko-en", "en"),
        ("ko-KR", "ko"),  # a locale: its language
        ("zh-tw", "zh"),
        ("ja-jp", "ja"),
        ("en-de", "en"),  # the same tokenizer either way
        ("pt-BR", "pt"),
    ],
)
def test_a_language_pair_names_its_target(lang, code):
    assert language_code(lang) == code


def test_korean_scores_equal_sacrebleus_command(seedpairs_dir, tmp_path, capsys):
    hyp, ref = _korean_pair(seedpairs_dir, tmp_path)
    hyps, refs = list(read_lines(hyp)), list(read_lines(ref))
    ours = corpus_scores(hyps, refs, tgt_lang="ko")
    for options in (["-l", "en-ko"], ["--tokenize", "ko-mecab"]):
        theirs = _sacrebleu(ref, hyp, *options)
        assert ours.bleu == pytest.approx(theirs["BLEU"]["score"], abs=1e-5)
        assert ours.bleu_signature == theirs["BLEU"]["signature"]
        assert ours.chrf == pytest.approx(theirs["chrF2"]["score"], abs=1e-5)
        assert ours.chrf_signature == theirs["chrF2"]["signature"]
    assert "tok:ko-mecab" in ours.bleu_signature
    # morphemes, not eojeol: 13a scores the same Korean text differently
    thirteen_a = corpus_scores(hyps, refs, tgt_lang="ko", tokenize="13a")
    assert thirteen_a.bleu == pytest.approx(_sacrebleu(ref, hyp)["BLEU"]["score"], abs=1e-5)
    assert abs(thirteen_a.bleu - ours.bleu) > 1.0
    # the command: the language from --ref's suffix, or -l, or an explicit --tokenize
    for extra, expected in (([], ours), (["-l", "ko"], ours), (["--tokenize", "13a"], thirteen_a)):
        assert main(["evaluate", "--hyp", str(hyp), "--ref", str(ref), *extra]) == 0
        out = capsys.readouterr().out
        assert f"BLEU {expected.bleu:.2f}  ({expected.bleu_signature})" in out
        assert f"chrF {expected.chrf:.2f}  ({expected.chrf_signature})" in out


def test_english_references_keep_13a(tmp_path, capsys):
    (tmp_path / "ref.en").write_text("the cat sat on the mat.\nhello, world!\n")
    (tmp_path / "hyp.en").write_text("the cat sat on a mat.\nhello world!\n")
    assert (
        main(["evaluate", "--hyp", str(tmp_path / "hyp.en"), "--ref", str(tmp_path / "ref.en")])
        == 0
    )
    assert "tok:13a" in capsys.readouterr().out


def test_missing_mecab_is_an_error_that_says_how_to_install_it(monkeypatch, tmp_path, capsys):
    monkeypatch.setattr(ko_mecab, "MeCab", None)  # as if sacrebleu[ko] were not installed
    with pytest.raises(ScoringError, match=r"pip install 'sacrebleu\[ko\]'"):
        corpus_scores(["가"], ["가"], tgt_lang="ko")
    (tmp_path / "t.ko").write_text("안녕하세요\n", encoding="utf-8")
    (tmp_path / "t.txt").write_text("안녕하세요\n", encoding="utf-8")
    for files, extra in (("t.ko", []), ("t.txt", ["-l", "en-ko"])):
        args = ["evaluate", "--hyp", str(tmp_path / files), "--ref", str(tmp_path / files)]
        assert main([*args, *extra]) == 2
        captured = capsys.readouterr()
        assert captured.out == ""  # no 13a score printed instead
        lines = captured.err.strip().splitlines()
        assert len(lines) == 1 and "sacrebleu[ko]" in lines[0] and "ko-mecab" in lines[0]
