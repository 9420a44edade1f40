"""``aiayn data corpora``: a pair's training corpora listed and fetched through mtdata's own
client, from a local HTTP server (no network): an mtdata index of the server's corpora is
written where mtdata reads its index (``$MTDATA``), and each command runs in a process of its
own, as a user runs it."""

from __future__ import annotations

import functools
import gzip
import http.server
import io
import json
import os
import socket
import subprocess
import sys
import tarfile
import threading
import zipfile
from pathlib import Path

import pytest

HELPER = Path(__file__).with_name("mtdata_index.py")
SRC = Path(__file__).resolve().parents[2] / "src"
# English with Korean: 36 plain pairs, one English sentence with two translations, an empty
# pair and one with whitespace to collapse; and 10 pairs the other way round (Korean first)
TATOEBA = [
    *[(f"Sentence number {i}.", f"문장 번호 {i}.") for i in range(36)],
    ("I like music.", "나는 음악을 좋아해요."),
    ("I like music.", "음악이 좋아요."),
    ("", "빈 줄"),
    ("Two  spaces\there.", "공백  두 개."),
]
REVERSED = [(f"거꾸로 {i}.", f"Reversed {i}.") for i in range(10)]
CHALLENGE = [(f"Challenge {i}.", f"도전 {i}.") for i in range(12)]  # English first (eng-kor)


def _zip(pairs: list[tuple[str, str]], a: str, b: str) -> bytes:
    """An OPUS moses archive: one file a language, and a README."""
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w") as z:
        for i, lang in enumerate((a, b)):
            z.writestr(f"Tatoeba.{a}-{b}.{lang}", "".join(p[i] + "\n" for p in pairs))
        z.writestr("README", "the corpus's readme\n")
    return out.getvalue()


def _challenge_tar(pairs: list[tuple[str, str]]) -> bytes:
    """A Tatoeba Challenge archive of eng-kor, in the release's layout."""
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w") as tar:
        for i, side in enumerate(("src", "trg")):
            data = gzip.compress("".join(p[i] + "\n" for p in pairs).encode())
            info = tarfile.TarInfo(f"data/release/v2023-09-26/eng-kor/train.{side}.gz")
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return out.getvalue()


class _Quiet(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args) -> None:
        pass


@pytest.fixture(scope="module")
def mtdata_home(tmp_path_factory):
    """``$MTDATA`` holding an index of the corpora a local server serves."""
    root = tmp_path_factory.mktemp("corpora")
    served = root / "served"
    (served / "OPUS-Tatoeba").mkdir(parents=True)
    (served / "OPUS-Tatoeba" / "en-ko.txt.zip").write_bytes(_zip(TATOEBA, "en", "ko"))
    (served / "OPUS-Tatoeba" / "en-pt.txt.zip").write_bytes(_zip([("Hi.", "Oi.")], "en", "pt"))
    tsv = "".join(f"{k}\t{e}\n" for k, e in REVERSED).encode()
    (served / "ko-en.tsv.gz").write_bytes(gzip.compress(tsv))
    (served / "damaged.txt.zip").write_bytes(_zip(TATOEBA, "en", "ko")[:200])
    (served / "Tatoeba-Challenge-v2023-09-26").mkdir()
    (served / "Tatoeba-Challenge-v2023-09-26" / "eng-kor.tar").write_bytes(
        _challenge_tar(CHALLENGE)
    )
    server = http.server.ThreadingHTTPServer(
        ("127.0.0.1", 0), functools.partial(_Quiet, directory=str(served))
    )
    threading.Thread(target=server.serve_forever, daemon=True).start()
    with socket.socket() as s:  # a port nothing listens on: no network
        s.bind(("127.0.0.1", 0))
        offline = f"http://127.0.0.1:{s.getsockname()[1]}"
    home = root / "mtdata"
    base = f"http://127.0.0.1:{server.server_address[1]}"
    subprocess.run([sys.executable, str(HELPER), str(home), base, offline], check=True)
    (home / "server").write_text(base)  # the Tatoeba Challenge's archives are served there too
    yield home
    server.shutdown()


def _env(home: Path) -> dict[str, str]:
    path = os.pathsep.join(p for p in (str(SRC), os.environ.get("PYTHONPATH")) if p)
    return {**os.environ, "MTDATA": str(home), "PYTHONPATH": path}


def _aiayn(home: Path, cwd: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "aiayn", "data", "corpora", *args],
        cwd=cwd,
        env=_env(home),
        capture_output=True,
        text=True,
        timeout=120,
    )


def _lines(path: Path) -> list[str]:
    return gzip.decompress(path.read_bytes()).decode("utf-8").splitlines()


def test_a_pairs_corpora_are_listed_with_their_licences(mtdata_home, tmp_path):
    done = _aiayn(mtdata_home, tmp_path, "--pair", "en-ko")
    assert done.returncode == 0, done.stderr
    rows = [line.split(maxsplit=1) for line in done.stdout.splitlines()]
    assert rows == [
        ["OPUS-tatoeba-v1-eng-kor", "CC BY 2.0 FR"],
        ["Tatoeba-challenge-v20230926-eng-kor", "CC BY-NC-SA 4.0"],
        ["Test-damaged-1-eng-kor", "unknown"],
        ["Test-development_funds-1-eng-kor", "unknown"],
        ["Test-missing-1-eng-kor", "unknown"],
        ["Test-offline-1-eng-kor", "unknown"],
        ["Test-reversed-1-kor-eng", "unknown"],
    ]  # by id; the eng-por corpus is not of the pair, the dev and test sets not corpora
    assert "7 corpora for en-ko (mtdata's index and the Tatoeba Challenge)" in done.stderr
    assert "licence unknown for 5" in done.stderr
    assert "2 development and test sets not listed" in done.stderr


def test_corpora_are_fetched_into_the_layout_a_recipe_reads(mtdata_home, tmp_path):
    ids = ["OPUS-tatoeba-v1-eng-kor", "Test-reversed-1-kor-eng"]
    done = _aiayn(
        mtdata_home, tmp_path, "--pair", "en-ko", "--get", *ids, "--valid", "5", "--dest", "corpus"
    )
    assert done.returncode == 0, done.stderr
    corpus = tmp_path / "corpus"
    assert sorted(p.name for p in corpus.iterdir()) == [
        "sources.tsv",
        "train.en.gz",
        "train.ko.gz",
        "valid.en.gz",
        "valid.ko.gz",
    ]
    train = list(zip(_lines(corpus / "train.en.gz"), _lines(corpus / "train.ko.gz"), strict=True))
    valid = list(zip(_lines(corpus / "valid.en.gz"), _lines(corpus / "valid.ko.gz"), strict=True))
    served = [(e, k) for e, k in TATOEBA if e] + [(e, k) for k, e in REVERSED]
    served = [(" ".join(e.split()), " ".join(k.split())) for e, k in served]
    assert len(valid) == 5 and set(valid) <= set(served)
    assert set(train) <= set(served) and not set(train) & set(valid)
    for e, k in train + valid:  # English on the English side, whichever way it was served
        assert e.isascii() and not k.isascii()
    held_en, held_ko = {e for e, _ in valid}, {k for _, k in valid}
    assert not any(e in held_en or k in held_ko for e, k in train)  # no sentence seen twice
    dropped = [p for p in served if p not in valid and (p[0] in held_en or p[1] in held_ko)]
    assert len(train) == len(served) - len(valid) - len(dropped)
    assert ("Two spaces here.", "공백 두 개.") in served
    rows = [line.split("\t") for line in (corpus / "sources.tsv").read_text().splitlines()]
    assert rows[0] == ["id", "licence", "pairs", "url"]
    assert [r[:3] for r in rows[1:]] == [
        ["OPUS-tatoeba-v1-eng-kor", "CC BY 2.0 FR", "39"],
        ["Test-reversed-1-kor-eng", "unknown", "10"],
    ]
    assert f"{len(train)} training and 5 validation pairs" in done.stdout


def test_the_corpus_is_read_by_prepare_as_a_recipe_prefix(mtdata_home, tmp_path):
    from aiayn.data.corpus import read_parallel

    done = _aiayn(
        mtdata_home,
        tmp_path,
        "--pair",
        "ko-en",
        "--get",
        "Test-reversed-1-kor-eng",
        "--valid",
        "2",
        "--dest",
        "corpus",
    )
    assert done.returncode == 0, done.stderr
    pairs = list(read_parallel(tmp_path / "corpus/train.ko.gz", tmp_path / "corpus/train.en.gz"))
    assert len(pairs) == 8 and all(k.startswith("거꾸로") for k, _ in pairs)


DRIVER = """
import contextlib, io, json, sys
from aiayn.cli import main
results = []
for argv in json.loads(sys.argv[1]):
    err = io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
        rc = main(["data", "corpora", *argv])
    results.append([rc, err.getvalue()])
print(json.dumps(results))
"""

BAD = [
    (["--pair", "en-xyz"], "'xyz' is not a language code"),
    (["--pair", "enko"], "give two language codes"),
    (["--pair", "en-zz"], "holds no parallel corpus for en-zz"),
    (["--pair", "en-ko", "--get", "Nope-x-1-eng-kor"], "no such dataset in mtdata's index"),
    (["--pair", "en-ko", "--get", "garbage"], "not a dataset id"),
    (["--pair", "en-ko", "--get", "OPUS-tatoeba-v1-eng-por"], "not a parallel corpus of en-ko"),
    (["--pair", "en-ko", "--get", "Test-missing-1-eng-kor"], "the server answered HTTP 404"),
    (["--pair", "en-ko", "--get", "Test-offline-1-eng-kor"], "no connection: check the network"),
    (["--pair", "en-ko", "--get", "Test-damaged-1-eng-kor"], "is not the zip archive expected"),
    (["--pair", "en-ko", "--get", "Test-reversed-1-kor-eng", "--valid", "10"], "too few"),
    (["--pair", "en-ko", "--get", "Test-reversed-1-kor-eng", "--dest", "mine"], "aiayn wrote"),
    (["--get", "Test-reversed-1-kor-eng"], "needs --pair SRC-TGT"),
]


def _main_calls(home: Path, cwd: Path, argvs: list[list[str]]) -> list[tuple[int, str]]:
    """``aiayn data corpora ARGV`` for each of ``argvs``, in one process: (status, stderr)."""
    done = subprocess.run(
        [sys.executable, "-c", DRIVER, json.dumps(argvs)],
        cwd=cwd,
        env=_env(home),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    return [(rc, err) for rc, err in json.loads(done.stdout)]


def test_bad_input_is_one_line_exit_2_and_nothing_written(mtdata_home, tmp_path):
    (tmp_path / "mine").mkdir()
    (tmp_path / "mine" / "notes.txt").write_text("mine\n")
    argvs = [a if "--dest" in a or "--get" not in a else [*a, "--dest", "out"] for a, _ in BAD]
    results = _main_calls(mtdata_home, tmp_path, argvs)
    for (argv, expected), (rc, err) in zip(BAD, results, strict=True):
        errors = [line for line in err.splitlines() if "error" in line]
        assert rc == 2 and len(errors) == 1, (argv, err)
        assert errors[0].startswith("aiayn data: error: ") and expected in errors[0], (argv, err)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["mine"]  # nothing half-written
    assert [p.name for p in (tmp_path / "mine").iterdir()] == ["notes.txt"]


def test_a_corpus_fetched_before_is_replaced_only_with_overwrite(mtdata_home, tmp_path):
    get = ["--pair", "en-ko", "--get", "Test-reversed-1-kor-eng", "--dest", "corpus"]
    first, again, replaced = _main_calls(
        mtdata_home,
        tmp_path,
        [[*get, "--valid", "0"], [*get, "--valid", "3"], [*get, "--valid", "3", "--overwrite"]],
    )
    assert first[0] == 0 and again[0] == 2 and "pass --overwrite" in again[1]
    assert replaced[0] == 0 and len(_lines(tmp_path / "corpus" / "valid.en.gz")) == 3


def test_the_tatoeba_challenges_training_set_is_fetched_from_its_archive(mtdata_home, tmp_path):
    mirror = (mtdata_home / "server").read_text()
    done = _aiayn(
        mtdata_home,
        tmp_path,
        "--pair",
        "ko-en",
        "--mirror",
        mirror,
        "--get",
        "Tatoeba-challenge-v20230926-eng-kor",
        "--valid",
        "2",
        "--dest",
        "corpus",
    )
    assert done.returncode == 0, done.stderr
    ko, en = _lines(tmp_path / "corpus/train.ko.gz"), _lines(tmp_path / "corpus/train.en.gz")
    assert len(ko) == 10 and set(zip(en, ko, strict=True)) < set(CHALLENGE)
    assert (
        "Tatoeba-challenge-v20230926-eng-kor\tCC BY-NC-SA 4.0\t12\t" + mirror
        in (tmp_path / "corpus/sources.tsv").read_text()
    )


def test_a_bad_language_code_is_refused_before_the_index_is_read(capsys, monkeypatch):
    """``--pair en-xx`` is one line at once: the codes are checked on mtdata's ISO tables,
    not after its corpus index has loaded (seconds to a minute)."""
    import sys

    from aiayn.cli import main

    monkeypatch.delitem(sys.modules, "aiayn.data.corpora", raising=False)
    assert main(["data", "corpora", "--pair", "en-xx"]) == 2
    assert "'xx' is not a language code" in capsys.readouterr().err
    assert "aiayn.data.corpora" not in sys.modules
