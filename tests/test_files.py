"""``aiayn.files``: directories written whole or not at all, never over someone else's."""

import os

import pytest

from aiayn.files import DestinationError, remove_stale_temporaries, write_directory


def _mine(path):
    return (path / "MINE").exists()


def test_a_failed_write_leaves_the_old_directory_and_no_temporary(tmp_path):
    dest = tmp_path / "out"
    with write_directory(dest) as tmp:
        (tmp / "MINE").write_text("v1")
    with (
        pytest.raises(RuntimeError),
        write_directory(dest, replace=True, replaceable=_mine) as tmp,
    ):
        (tmp / "MINE").write_text("v2")
        raise RuntimeError("crash while writing")
    assert (dest / "MINE").read_text() == "v1"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out"]


def test_replace_needs_both_permission_and_ownership(tmp_path):
    dest = tmp_path / "out"
    dest.mkdir()
    (dest / "theirs.txt").write_text("keep")
    with (
        pytest.raises(DestinationError, match="aiayn wrote"),
        write_directory(dest, replace=True, replaceable=_mine),
    ):
        pass
    (dest / "theirs.txt").unlink()
    (dest / "MINE").write_text("v1")
    with (
        pytest.raises(DestinationError, match="--overwrite"),
        write_directory(dest, replaceable=_mine),
    ):
        pass
    with write_directory(dest, replace=True, replaceable=_mine) as tmp:
        (tmp / "MINE").write_text("v2")
    assert (dest / "MINE").read_text() == "v2"


def test_temporaries_of_dead_writers_are_removed_and_live_ones_kept(tmp_path):
    dest = tmp_path / "out"
    dead = subprocess_pid_that_exited()
    (tmp_path / f".out.tmp-{dead}-0").mkdir()
    (tmp_path / f".out.old-{dead}-3").mkdir()
    (tmp_path / f".out.tmp-{os.getpid()}-9").mkdir()
    (tmp_path / ".other.tmp-1-0").mkdir()
    removed = remove_stale_temporaries(dest)
    assert sorted(p.name for p in removed) == [f".out.old-{dead}-3", f".out.tmp-{dead}-0"]
    assert (tmp_path / f".out.tmp-{os.getpid()}-9").exists()
    assert (tmp_path / ".other.tmp-1-0").exists()


def subprocess_pid_that_exited() -> int:
    import subprocess
    import sys

    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid
