"""``aiayn data flores200|ntrex|tatoeba``: the download path run on a ``file://`` mirror built
from the shared copies (upstream's paths, NTREX's CR LF line ends), no network."""

from __future__ import annotations

import gzip
from pathlib import Path

import pytest

from aiayn.cli import main
from aiayn.data.testsets import NTREX, OPUS_MT_TESTSETS, remotes

LANGS = ["ko", "pt"]
# the shared copy of each file aiayn writes (the same layout)
SETS = ("flores200", "ntrex", "tatoeba")


def _mirror(seedpairs: Path, root: Path, *, truncate: str = "") -> str:
    """A ``file://`` tree holding the sets' files at upstream's paths, as upstream has them
    (plain text; the shared NTREX copy keeps upstream's CR LF)."""
    for name in SETS:
        for remote in remotes(name, LANGS):
            data = gzip.decompress((seedpairs / remote.target).read_bytes())
            if remote.path.endswith(truncate) and truncate:
                data = b"".join(data.splitlines(keepends=True)[:-5])
            path = root / remote.path
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(data)
    return root.as_uri()


def _lines(path: Path) -> list[str]:
    return gzip.decompress(path.read_bytes()).decode("utf-8").split("\n")


def test_every_set_through_the_download_path(seedpairs_dir, tmp_path, capsys):
    mirror = _mirror(seedpairs_dir, tmp_path / "mirror")
    for name in SETS:
        args = ["data", name, "--dest", str(tmp_path / "out"), "--langs", "ko,pt"]
        assert main([*args, "--mirror", mirror]) == 0
        assert f"{name}: " in capsys.readouterr().out
    written = sorted(p.relative_to(tmp_path / "out") for p in (tmp_path / "out").rglob("*.gz"))
    assert [str(p) for p in written] == [
        "flores200/devtest.en.gz",
        "flores200/devtest.ko.gz",
        "flores200/devtest.pt.gz",
        "ntrex/newstest2019.en.gz",
        "ntrex/newstest2019.ko.gz",
        "ntrex/newstest2019.pt.gz",
        "tatoeba/test.en-ko.en.gz",
        "tatoeba/test.en-ko.ko.gz",
        "tatoeba/test.en-pt.en.gz",
        "tatoeba/test.en-pt.pt.gz",
    ]
    for path in written:
        ours = _lines(tmp_path / "out" / path)
        shared = gzip.decompress((seedpairs_dir / path).read_bytes()).decode("utf-8")
        assert ours == shared.replace("\r\n", "\n").split("\n")  # plain line ends, same text
        assert not any("\r" in line for line in ours)
    # aligned: line i of English and of Korean are the same sentence's
    assert len(_lines(tmp_path / "out/ntrex/newstest2019.ko.gz")) == 1997 + 1
    assert "한" in "".join(_lines(tmp_path / "out/flores200/devtest.ko.gz"))


def test_a_short_file_is_refused_and_not_kept_as_good(seedpairs_dir, tmp_path, capsys):
    mirror = _mirror(seedpairs_dir, tmp_path / "mirror", truncate="kor_Hang.devtest")
    args = ["data", "flores200", "--dest", str(tmp_path / "out"), "--mirror", mirror]
    assert main(args) == 2
    assert "kor_Hang.devtest: 1007 sentences, expected 1012" in capsys.readouterr().err
    assert not (tmp_path / "out/flores200/devtest.ko.gz").exists()
    assert not list((tmp_path / "out").rglob("*.part"))


def test_a_local_copy_is_read_in_the_written_layout(seedpairs_dir, tmp_path):
    args = ["data", "tatoeba", "--dest", str(tmp_path / "out"), "--langs", "ko"]
    assert main([*args, "--from", str(seedpairs_dir)]) == 0
    assert len(_lines(tmp_path / "out/tatoeba/test.en-ko.ko.gz")) == 2400 + 1


def test_upstream_addresses_are_pinned():
    urls = [f"{r.base}/{r.path}" for name in SETS for r in remotes(name, ["ko"])]
    assert all(r.startswith((OPUS_MT_TESTSETS, NTREX)) for r in urls)
    assert f"{NTREX}/NTREX-128/newstest2019-ref.kor.txt" in urls
    assert (
        f"{OPUS_MT_TESTSETS}/datasets/facebook/flores/flores200_dataset/devtest/kor_Hang.devtest"
        in urls
    )
    for base in (OPUS_MT_TESTSETS, NTREX):
        assert len(base.rsplit("/", 1)[1]) == 40  # a commit, not a branch that moves


@pytest.mark.parametrize(
    ("lang", "folder", "prefix"),
    [
        ("de", "deu-eng", "test.de-en"),
        ("ja", "eng-jpn", "test.en-ja"),
        ("ko", "eng-kor", "test.en-ko"),
    ],
)
def test_tatoeba_pairs_are_named_as_upstream(lang, folder, prefix):
    files = remotes("tatoeba", [lang])
    assert {f.path.split("/")[-2] for f in files} == {folder}
    assert {f.target for f in files} == {f"tatoeba/{prefix}.en.gz", f"tatoeba/{prefix}.{lang}.gz"}


def test_without_from_a_copy_under_the_data_dir_is_read(seedpairs_dir, tmp_path, monkeypatch):
    monkeypatch.setenv("AIAYN_DATA_DIR", str(seedpairs_dir.parent))
    assert main(["data", "tatoeba", "--dest", str(tmp_path / "out"), "--langs", "ko"]) == 0
    assert len(_lines(tmp_path / "out/tatoeba/test.en-ko.ko.gz")) == 2400 + 1
    monkeypatch.setenv("AIAYN_DATA_DIR", str(tmp_path / "nothing"))  # no copy: the mirror
    mirror = (tmp_path / "empty-mirror").as_uri()
    args = ["data", "flores200", "--dest", str(tmp_path / "o2"), "--langs", "ko"]
    assert main([*args, "--mirror", mirror]) == 2  # went to the (empty) mirror, not a copy
