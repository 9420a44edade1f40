"""Documents through ``/translate_file`` and ``/download_file``: translated by the served
model with their structure kept; over the server's bounds 413, broken or hostile 400, each
in one line; translated files only in the server's own folder, and expiring."""

from __future__ import annotations

import io
import tempfile
import time
import zipfile
from pathlib import Path

import pytest

pytest.importorskip("fastapi", reason="the serve extra is a dev dependency")
docx = pytest.importorskip("docx")

from ..text.documents import SRT, docx_bytes  # noqa: E402
from ..text.test_documents_hostile import LAUGHS, _with_member  # noqa: E402
from .conftest import expected_translations  # noqa: E402

DOCX = "application/vnd.openxmlformats-officedocument.wordprocessingml.document"


@pytest.fixture(scope="module")
def client(en_de):
    from fastapi.testclient import TestClient

    from aiayn.search_options import SearchOptions
    from aiayn.serve.app import create_app
    from aiayn.serve.settings import ServeSettings

    settings = ServeSettings(
        models=(str(en_de),),
        workers=1,
        decode=SearchOptions(beam=2),
        char_limit=20_000,
        max_file_parts=3,
    )
    with TestClient(create_app(settings)) as client:
        yield client


def _upload(client, name: str, content: bytes, source: str = "en", **fields):
    files = {"file": (name, content)}
    data = {"source": source, "target": "de", **fields}
    return client.post("/translate_file", files=files, data=data)


def _download(client, answer) -> tuple[bytes, str]:
    assert answer.status_code == 200, answer.text
    url = answer.json()["translatedFileUrl"]
    got = client.get(url[url.index("/download_file/") :])
    assert got.status_code == 200
    return got.content, got.headers["content-type"]


def test_a_docx_comes_back_translated_with_its_structure(client, en_de):
    from aiayn.text.documents import read_document

    source = docx_bytes()
    content, kind = _download(client, _upload(client, "park.docx", source, source="auto"))
    assert kind == DOCX
    before = read_document(source, "docx")
    after = docx.Document(io.BytesIO(content))
    expected = expected_translations(en_de, before.texts, beam=2)
    assert len(after.tables) == 1 and after.tables[0].cell(1, 1).text == expected[5]
    assert after.sections[0].header.paragraphs[0].text == expected[-2]
    assert len(after.paragraphs) == len(docx.Document(io.BytesIO(source)).paragraphs)


def test_subtitles_keep_their_timings(client):
    content, kind = _download(client, _upload(client, "talk.srt", SRT.encode()))
    assert kind.startswith("application/x-subrip")
    assert (
        content.decode().count("-->") == 2 and "00:00:04,000 --> 00:00:06,250" in content.decode()
    )


def _bomb() -> bytes:
    def zeros(stream):
        block = bytes(1 << 20)
        for _ in range(120):
            stream.write(block)

    return _with_member(docx_bytes(), "word/media/zeros.bin", zeros)


@pytest.mark.parametrize(
    ("name", "make", "status", "words"),
    [
        ("bomb.docx", _bomb, 413, "bytes unpacked, more than the limit"),
        ("broken.docx", lambda: docx_bytes()[:2000], 400, "not a Word document (a broken"),
        ("x.pptx", docx_bytes, 400, "x.pptx: not a PowerPoint file"),
        (
            "lol.docx",
            lambda: _with_member(docx_bytes(), "word/document.xml", lambda s: s.write(LAUGHS)),
            400,
            "declares XML entities",
        ),
        (
            "many.srt",
            lambda: "".join(
                f"{k}\n00:00:0{k},000 --> 00:00:0{k},500\nhi\n\n" for k in range(1, 5)
            ).encode(),
            413,
            "4 cues, more than the limit of 3",
        ),
        ("runs.docx", lambda: docx_bytes(runs=10_000), 400, "exceeds text limit (20000)"),
        ("a.pdf", lambda: b"%PDF", 400, "file format not supported"),
        ("empty.md", lambda: b"", 400, "empty file"),
    ],
)
def test_hostile_and_oversized_documents_are_one_line(client, name, make, status, words):
    start = time.perf_counter()
    answer = _upload(client, name, make())
    assert answer.status_code == status, answer.text
    message = answer.json()["error"]
    assert words in message and "\n" not in message
    assert time.perf_counter() - start < 30


def test_over_the_byte_bound_is_413_before_reading_it_all(en_de):
    from fastapi.testclient import TestClient

    from aiayn.serve.app import create_app
    from aiayn.serve.settings import ServeSettings

    settings = ServeSettings(models=(str(en_de),), workers=1, max_file_mb=4096 / 2**20)
    with TestClient(create_app(settings)) as client:
        answer = _upload(client, "big.docx", docx_bytes())
    assert answer.status_code == 413 and "over 4,096 bytes" in answer.json()["error"]


def test_translated_files_stay_in_their_folder_and_expire():
    from aiayn.serve.translated_files import TranslatedFiles

    files = TranslatedFiles(expire_s=0.2, keep=2)
    folder = files.folder
    assert folder.parent == Path(tempfile.gettempdir())
    name = files.add("../../etc/passwd", b"one")
    assert "/" not in name and (folder / name).read_bytes() == b"one"
    assert files.get(name) == b"one"
    assert files.get("../" + name) is None and files.get(name.replace(".", "/", 1)) is None
    second, third = files.add("b.txt", b"2"), files.add("c.txt", b"3")
    assert files.get(name) is None and not (folder / name).exists()  # the oldest went first
    time.sleep(0.3)
    assert files.get(second) is None and files.get(third) is None
    assert list(folder.iterdir()) == []
    files.close()
    assert not folder.exists()


def test_the_frontend_lists_every_file_format(client):
    formats = client.get("/frontend/settings").json()["supportedFilesFormat"]
    assert {".txt", ".docx", ".pptx", ".odt", ".odp", ".epub", ".srt", ".vtt", ".md"} <= set(
        formats
    )
    assert {".po", ".pot", ".xlf", ".xliff", ".json", ".arb", ".yml", ".xml"} <= set(formats)


def test_a_zip_member_name_cannot_leave_the_folder(client):
    """Uploaded packages are read in memory: a member named ../x is never written."""
    evil = _with_member(docx_bytes(), "../../evil.txt", lambda s: s.write(b"x"))
    _download(client, _upload(client, "evil.docx", evil))
    assert not (Path(tempfile.gettempdir()).parent / "evil.txt").exists()
    assert zipfile.ZipFile(io.BytesIO(evil)).getinfo("../../evil.txt")


def test_a_po_file_comes_back_in_the_target_language_with_a_summary(client):
    from aiayn.text.documents.catalogue import KINDS

    from ..text.catalogues import FILES

    pytest.importorskip("translate.storage.po")
    answer = _upload(client, "notes.po", FILES["po"])
    assert answer.json()["summary"].startswith("notes.po: 3 units translated")
    content, kind = _download(client, answer)
    assert kind.startswith("text/x-gettext-translation")
    store = KINDS["po"].parse(content)
    assert store.gettargetlanguage() == "de"
    units = [u for u in store.units if not u.isheader()]
    assert "%s" in units[0].target and units[0].getcontext() == "menu"
    assert len(units[1].target.strings) == 2 and units[3].target == "Gespeichert"
    again = _upload(client, "notes.po", FILES["po"], retranslate="true").json()["summary"]
    assert again.startswith("notes.po: 4 units translated")


@pytest.mark.parametrize(
    ("name", "content", "status", "words"),
    [
        ("lol.xlf", b'<!DOCTYPE x [<!ENTITY a "b">]><xliff/>', 400, "declares XML entities"),
        ("a.json", b'{"a": ', 400, "a.json: not a readable JSON file"),
        ("strings.xml", b"<resources><string>", 400, "not a readable Android string"),
    ],
)
def test_a_hostile_localisation_file_is_one_line(client, name, content, status, words):
    pytest.importorskip("translate.storage.po")
    answer = _upload(client, name, content)
    assert answer.status_code == status and words in answer.json()["error"]
