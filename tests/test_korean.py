"""English→Korean end to end on a slice of the open Korean sets: prepare (SentencePiece on
Hangul), a few training updates, translate, evaluate with ko-mecab, serve."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from aiayn.cli import main
from aiayn.config import PrepareConfig
from aiayn.config_io import load_toml, recipe_from_dict
from aiayn.data import load_prepared, read_lines
from aiayn.data.testsets import remotes
from aiayn.eval import corpus_scores

from .train.conftest import config_dict, write_toml

RARE = "漢字 한자를 읽을 수 있어요?"  # Hanja: characters the vocabulary has never seen


def _slice(seedpairs: Path, root: Path) -> str:
    """Tatoeba En-Ko: 600 training pairs, 40 validation, 20 test, as PREFIX.{en,ko}."""
    en = list(read_lines(seedpairs / "tatoeba" / "test.en-ko.en.gz"))
    ko = list(read_lines(seedpairs / "tatoeba" / "test.en-ko.ko.gz"))
    root.mkdir()
    for name, lo, hi in (("train", 0, 600), ("valid", 600, 640), ("test", 640, 660)):
        for lang, lines in (("en", en), ("ko", ko)):
            (root / f"{name}.{lang}").write_text("\n".join(lines[lo:hi]) + "\n", encoding="utf-8")
    return str(root)


@pytest.fixture(scope="module")
def korean(tmp_path_factory) -> Path:
    from .conftest import data_dir

    seedpairs = data_dir() / "seedpairs"
    if not (seedpairs / "tatoeba" / "test.en-ko.ko.gz").is_file():
        pytest.skip(f"seedpairs not found at {seedpairs} (set AIAYN_DATA_DIR)")
    w = tmp_path_factory.mktemp("korean")
    corpus = _slice(seedpairs, w / "corpus")
    prepare = ["prepare", "--src-lang", "en", "--tgt-lang", "ko", "--out", str(w / "data")]
    prepare += ["--train", f"{corpus}/train", "--valid", f"{corpus}/valid", "--workers", "1"]
    prepare += ["--vocab-size", "1000", "--character-coverage", "0.9995", "--byte-fallback"]
    assert main(prepare) == 0
    run = {"max_updates": 150, "valid_every": 150, "save_every": 150, "valid_bleu": True}
    optim = {"lr": 0.006, "warmup_steps": 20}
    config = config_dict(w / "data", w / "run", run=run, model={"dropout": 0.0}, optim=optim)
    config["data"]["max_tokens"] = 512
    assert main(["train", str(write_toml(w / "train.toml", config))]) == 0
    return w


def test_sentencepiece_spells_hangul_and_falls_back_to_bytes(korean):
    data = load_prepared(korean / "data")
    tok = data.tgt_tokenizer
    pieces = [tok.pieces([i])[0] for i in range(tok.vocab_size)]
    assert sum(any("가" <= c <= "힣" for c in p) for p in pieces) > 300  # Hangul syllables
    lines = [*read_lines(korean / "corpus" / "test.ko"), RARE]
    for line in lines:  # no <unk>: every line decodes to itself
        assert tok.decode(tok.encode([line])[0]) == line
    assert "<0xE6>" in tok.pieces(tok.encode([RARE])[0])  # 漢 as UTF-8 bytes


def test_translate_and_evaluate_score_korean_with_ko_mecab(korean, capsys):
    test = korean / "corpus" / "test"
    hyp = korean / "hyp.ko"
    model = str(korean / "run" / "best")
    args = ["translate", "--model", model, "-i", f"{test}.en", "-o", str(hyp), "--beam", "2"]
    assert main([*args, "--ref", f"{test}.ko"]) == 0
    hyps, refs = list(read_lines(hyp)), list(read_lines(f"{test}.ko"))
    expected = corpus_scores(hyps, refs, tgt_lang="ko")
    assert "tok:ko-mecab" in expected.bleu_signature
    assert str(expected) in capsys.readouterr().err  # the model's target language chose it
    assert main(["evaluate", "--hyp", str(hyp), "--ref", f"{test}.ko"]) == 0
    assert capsys.readouterr().out.strip() == str(expected)
    signature = (korean / "run" / "valid_signatures.txt").read_text()
    assert "tok:ko-mecab" in signature  # validation during training too
    rows = [json.loads(x) for x in (korean / "run" / "metrics.jsonl").open()]
    assert any("chrf" in r for r in rows if r["kind"] == "valid")


@pytest.mark.slow
def test_served_korean_is_what_the_command_line_gives(korean, capsys):
    from .serve.conftest import Server, httpx

    model = str(korean / "run" / "best")
    queries = ["I like music.", "저는 음악을 좋아해요."]  # a Korean q goes in as it is
    (korean / "q.txt").write_text("\n".join(queries) + "\n", encoding="utf-8")
    assert main(["translate", "--model", model, "-i", str(korean / "q.txt"), "--beam", "2"]) == 0
    offline = capsys.readouterr().out.splitlines()
    server = Server(korean / "run" / "best", "--beam", "2")
    try:
        languages = httpx.get(server.url + "/languages").json()
        assert languages == [
            {"code": "en", "name": "English", "targets": ["ko"]},
            {"code": "ko", "name": "Korean", "targets": []},
        ]
        for q, want in zip(queries, offline, strict=True):
            for send in ("json", "data"):  # JSON and form-encoded, as clients send them
                response = httpx.post(
                    server.url + "/translate", **{send: {"q": q, "source": "en", "target": "ko"}}
                )
                assert response.status_code == 200, response.text
                assert response.headers["content-type"].startswith("application/json")
                assert response.json()["translatedText"] == want
        assert any("가" <= c <= "힣" for c in "".join(offline))  # Korean came back, not mojibake
    finally:
        server.stop()


@pytest.mark.parametrize(
    ("recipe", "src", "tgt", "coverage"),
    [
        ("en_ko_own_corpus", "en", "ko", 0.9995),
        ("ko_en_own_corpus", "ko", "en", 0.9995),
        ("pt_en_own_corpus", "pt", "en", 1.0),
    ],
)
def test_recipes_read_the_test_sets_aiayn_data_writes(recipe, src, tgt, coverage, tmp_path):
    path = Path(__file__).resolve().parents[1] / "configs" / f"{recipe}.toml"
    r = recipe_from_dict(load_toml(str(path)), where=str(path))
    assert (r.pipeline.src_lang, r.pipeline.tgt_lang) == (src, tgt)
    assert r.pipeline.test == (
        "../data/testsets/flores200/devtest",
        "../data/testsets/ntrex/newstest2019",
    )
    other = src if tgt == "en" else tgt
    written = {f.target for name in ("flores200", "ntrex") for f in remotes(name, [other])}
    wanted = {f"{p}.{lang}.gz" for p in r.pipeline.test for lang in (src, tgt)}
    assert {w.removeprefix("../data/testsets/") for w in wanted} <= written  # `aiayn data`'s
    cfg = PrepareConfig(src_lang=src, tgt_lang=tgt, train="t", valid="v", **r.prepare)
    assert cfg.character_coverage == coverage
    assert cfg.byte_fallback == (coverage < 1)


def test_split_corpus_keeps_shared_sentences_in_one_part(tmp_path):
    import subprocess
    import sys

    en = [f"sentence {i % 150}" for i in range(400)]  # each English sentence 2-3 times
    ko = [f"문장 {i}" for i in range(400)]
    (tmp_path / "all.en").write_text("\n".join(en) + "\n", encoding="utf-8")
    (tmp_path / "all.ko").write_text("\n".join(ko) + "\n", encoding="utf-8")
    script = Path(__file__).resolve().parents[1] / "scripts" / "split_corpus.py"
    args = [str(tmp_path / "all"), "en", "ko", str(tmp_path / "out"), "--valid", "40"]
    subprocess.run([sys.executable, str(script), *args, "--test", "40"], check=True)
    parts = {
        name: [set(read_lines(tmp_path / "out" / f"{name}.{lang}")) for lang in ("en", "ko")]
        for name in ("train", "valid", "test")
    }
    assert sum(len(p[1]) for p in parts.values()) == 400  # every pair kept once
    assert all(len(parts[n][1]) >= 40 for n in ("valid", "test"))
    for a, b in (("train", "valid"), ("train", "test"), ("valid", "test")):
        assert not parts[a][0] & parts[b][0] and not parts[a][1] & parts[b][1]
