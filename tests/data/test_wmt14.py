"""Reading the WMT14 archives, offline: small archives with the official member names."""

import io
import tarfile

import pytest

from aiayn.data.corpus import CorpusError, read_lines
from aiayn.data.wmt14 import ARCHIVES, TEST_MEMBERS, TRAIN_MEMBERS, VALID_MEMBER, fetch_wmt14


def _tgz(path, members: dict[str, str]) -> None:
    with tarfile.open(path, "w:gz") as tar:
        for name, text in members.items():
            data = text.encode("utf-8")
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))


def _sgm(lines: list[str]) -> str:
    segs = "".join(f'<seg id="{i}">{line}</seg>\n' for i, line in enumerate(lines, 1))
    return f'<srcset setid="newstest2014">\n<doc docid="d">\n{segs}</doc>\n</srcset>\n'


@pytest.fixture
def archives(tmp_path):
    root = tmp_path / "archives"
    root.mkdir()
    for n, (archive, member) in enumerate(TRAIN_MEMBERS):
        _tgz(
            root / archive,
            {
                f"{member}.en": f"english {n} a\nenglish {n} b\n",
                f"{member}.de": f"deutsch {n} a\ndeutsch {n} b\n",
            },
        )
    archive, member = VALID_MEMBER
    _tgz(root / archive, {f"{member}.en": "dev one\n", f"{member}.de": "dev eins\n"})
    _tgz(
        root / "test-full.tgz",
        {
            TEST_MEMBERS["en"]: _sgm(["Tom &amp; Jerry", "two"]),
            TEST_MEMBERS["de"]: _sgm(["Tom &amp; Jerry", "zwei"]),
        },
    )
    assert {p.name for p in root.iterdir()} == set(ARCHIVES)
    return root


def test_the_archives_become_plain_text_splits(archives, tmp_path):
    dest = fetch_wmt14(tmp_path / "wmt14", source=archives)
    train = list(read_lines(dest / "train.en"))
    assert train == [
        "english 0 a",
        "english 0 b",
        "english 1 a",
        "english 1 b",
        "english 2 a",
        "english 2 b",
    ]
    assert list(read_lines(dest / "newstest2013.de")) == ["dev eins"]
    assert list(read_lines(dest / "newstest2014.en")) == ["Tom & Jerry", "two"]
    assert list(read_lines(dest / "newstest2014.de")) == ["Tom & Jerry", "zwei"]
    assert fetch_wmt14(tmp_path / "wmt14", source=archives) == dest  # present: kept


def test_a_missing_archive_or_member_is_named(archives, tmp_path):
    (archives / "dev.tgz").unlink()
    with pytest.raises(CorpusError, match=r"dev\.tgz: not found"):
        fetch_wmt14(tmp_path / "a", source=archives)
    _tgz(archives / "dev.tgz", {"dev/other.en": "x\n"})
    with pytest.raises(CorpusError, match=r"has no dev/newstest2013\.en"):
        fetch_wmt14(tmp_path / "b", source=archives)
