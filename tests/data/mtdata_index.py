"""Write a small mtdata index, of corpora served by a test's local HTTP server, where mtdata
reads its index: ``python mtdata_index.py MTDATA_DIR BASE_URL OFFLINE_URL``.

mtdata builds its whole index (about 290,000 corpora, a minute) when ``mtdata.index`` is
first imported, unless ``$MTDATA`` holds one already pickled; this writes that pickle
without importing ``mtdata.index``: the class is named in the pickle, and the entries
(``mtdata.entry``) are pickled as they are.
"""

from __future__ import annotations

import pickle
import sys
from pathlib import Path

import mtdata
from mtdata.entry import DatasetId, Entry


def entries(base: str, offline: str) -> list[Entry]:
    def did(text: str) -> DatasetId:
        return DatasetId.parse(text)

    return [
        Entry(
            did("OPUS-tatoeba-v1-eng-kor"),
            url=f"{base}/OPUS-Tatoeba/en-ko.txt.zip",
            in_paths=["*.en", "*.ko"],
            in_ext="txt",
        ),
        Entry(did("Test-reversed-1-kor-eng"), url=f"{base}/ko-en.tsv.gz"),
        Entry(did("Test-flores200_devtest-1-eng-kor"), url=f"{base}/devtest.tsv"),
        Entry(did("Test-tedtalks_test-1-eng-kor"), url=f"{base}/test.tsv"),
        Entry(did("Test-development_funds-1-eng-kor"), url=f"{base}/funds.tsv"),
        Entry(did("Test-missing-1-eng-kor"), url=f"{base}/missing.txt.gz"),
        Entry(
            did("Test-damaged-1-eng-kor"),
            url=f"{base}/damaged.txt.zip",
            in_paths=["*.en", "*.ko"],
            in_ext="txt",
        ),
        Entry(did("Test-offline-1-eng-kor"), url=f"{offline}/en-ko.txt.gz"),
        Entry(
            did("OPUS-tatoeba-v1-eng-por"),
            url=f"{base}/OPUS-Tatoeba/en-pt.txt.zip",
            in_paths=["*.en", "*.pt"],
            in_ext="txt",
        ),
    ]


def write(directory: Path, base: str, offline: str) -> None:
    state = {
        "entries": {e.did: e for e in entries(base, offline)},
        "papers": {},
        "ref_db": None,
        "version": mtdata.__version__,
    }
    body = pickle.dumps(state, protocol=2)  # PROTO 2, the dict, STOP
    # an mtdata.index.Index made with no arguments (NEWOBJ), the dict as its state (BUILD)
    data = b"\x80\x02cmtdata.index\nIndex\n)\x81" + body[2:-1] + b"b."
    directory.mkdir(parents=True, exist_ok=True)
    (directory / mtdata.cached_index_file.name).write_bytes(data)


if __name__ == "__main__":
    write(Path(sys.argv[1]), sys.argv[2], sys.argv[3])
