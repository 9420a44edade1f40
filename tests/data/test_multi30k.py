import gzip

import pytest

from aiayn.cli import main
from aiayn.data import multi30k
from aiayn.data.corpus import CorpusError, read_lines
from aiayn.data.multi30k import check_multi30k, fetch_multi30k, raw_path, tok_path


def test_copy_from_local_directory_checks_counts(tmp_path, multi30k_dir, capsys):
    assert (
        main(["data", "multi30k", "--dest", str(tmp_path / "m"), "--from", str(multi30k_dir)]) == 0
    )
    assert "all splits present" in capsys.readouterr().out
    assert (tmp_path / "m" / "tok" / "test_2016_flickr.lc.norm.tok.de.gz").is_file()


def test_wrong_sentence_count_is_reported(tmp_path, multi30k_dir):
    fetch_multi30k(tmp_path / "m", source=multi30k_dir)
    path = raw_path(tmp_path / "m", "val", "de")
    path.write_bytes(gzip.compress(b"only one line\n"))
    with pytest.raises(CorpusError, match=r"val\.de\.gz: 1 sentences, expected 1014"):
        check_multi30k(tmp_path / "m")


def test_missing_local_file_is_a_clear_error(tmp_path):
    with pytest.raises(CorpusError, match="not found in the local Multi30k directory"):
        fetch_multi30k(tmp_path / "m", source=tmp_path / "empty")


def test_download_lays_out_and_gzips_the_repository_files(tmp_path, monkeypatch):
    """The downloader against a file:// mirror of the repository's data/task1 layout."""
    mirror = tmp_path / "task1"
    (mirror / "raw").mkdir(parents=True)
    (mirror / "tok").mkdir()
    splits = {"train": 3, "val": 2, "test_2016_flickr": 1, "test_2017_flickr": 1}
    for split, n in splits.items():
        for lang in multi30k.LANGS:
            lines = "".join(f"{split} {lang} {i}\n" for i in range(n)).encode()
            (mirror / "raw" / f"{split}.{lang}.gz").write_bytes(gzip.compress(lines))
            (mirror / "tok" / f"{split}.lc.norm.tok.{lang}").write_bytes(lines)  # not gzipped
    monkeypatch.setattr(multi30k, "BASE_URL", mirror.as_uri())
    monkeypatch.setattr(multi30k, "SPLITS", splits)
    fetch_multi30k(tmp_path / "m")
    assert list(read_lines(tok_path(tmp_path / "m", "val", "fr"))) == ["val fr 0", "val fr 1"]
    assert list(read_lines(raw_path(tmp_path / "m", "train", "en")))[2] == "train en 2"


def test_download_failure_suggests_a_local_copy(tmp_path, monkeypatch):
    monkeypatch.setattr(multi30k, "BASE_URL", (tmp_path / "nowhere").as_uri())
    with pytest.raises(CorpusError, match="--from DIR"):
        fetch_multi30k(tmp_path / "m")


def test_aiayn_data_copies_from_the_data_dir_when_not_told(multi30k_dir, tmp_path, monkeypatch):
    from aiayn.cli import main

    monkeypatch.setenv("AIAYN_DATA_DIR", str(multi30k_dir.parent))
    assert main(["data", "multi30k", "--dest", str(tmp_path / "m")]) == 0
    check_multi30k(tmp_path / "m")
