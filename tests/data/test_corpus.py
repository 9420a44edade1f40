import gzip

import pytest

from aiayn.data.corpus import CorpusError, PairStats, read_lines, read_parallel

from .corpora import write_lines


def test_plain_and_gzip_read_the_same(tmp_path):
    lines = ["ein hund .", "zwei katzen ."]
    plain = write_lines(tmp_path / "a.de", lines)
    packed = write_lines(tmp_path / "b.de", lines, gz=True)
    assert list(read_lines(plain)) == list(read_lines(packed)) == lines


def test_different_line_counts_name_both_files_and_counts(tmp_path):
    src = write_lines(tmp_path / "x.en", ["a", "b", "c"])
    tgt = write_lines(tmp_path / "x.de", ["a", "b"])
    with pytest.raises(CorpusError) as e:
        list(read_parallel(src, tgt))
    assert str(src) in str(e.value) and str(tgt) in str(e.value)
    assert "3 lines" in str(e.value) and "has 2" in str(e.value)


def test_invalid_utf8_names_file_and_line(tmp_path):
    path = tmp_path / "bad.en"
    path.write_bytes(b"fine\nalso fine\nbad \xff byte\n")
    with pytest.raises(CorpusError, match=r"bad\.en: line 3: invalid UTF-8"):
        list(read_lines(path))


def test_invalid_utf8_in_gzip_names_file_and_line(tmp_path):
    path = tmp_path / "bad.en.gz"
    path.write_bytes(gzip.compress(b"ok\n\xc3\x28\n"))
    with pytest.raises(CorpusError, match="line 2: invalid UTF-8"):
        list(read_lines(path))


def test_empty_pairs_are_dropped_and_counted(tmp_path):
    src = write_lines(tmp_path / "x.en", ["a", "", "c", "d"])
    tgt = write_lines(tmp_path / "x.de", ["A", "B", "", "D"])
    stats = PairStats()
    assert list(read_parallel(src, tgt, stats=stats)) == [("a", "A"), ("d", "D")]
    assert (stats.pairs, stats.empty_dropped) == (2, 2)


def test_empty_line_can_be_an_error(tmp_path):
    src = write_lines(tmp_path / "x.en", ["a", ""])
    tgt = write_lines(tmp_path / "x.de", ["A", "B"])
    with pytest.raises(CorpusError, match=r"x\.en: line 2: empty line"):
        list(read_parallel(src, tgt, empty="error"))


def test_missing_file_is_a_one_line_error(tmp_path):
    with pytest.raises(CorpusError, match="no such file"):
        list(read_lines(tmp_path / "nope.en"))
