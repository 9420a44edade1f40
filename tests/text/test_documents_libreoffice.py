"""Each office format's translated output opened by a real reader: LibreOffice, headless,
converts it, and what it read holds the translation (and none of the source's words).
Skipped where ``soffice`` is not on PATH; test_documents.py reads every output back with its
format's own library everywhere (EPUB, subtitles and Markdown have only those readers here:
LibreOffice imports none of them)."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from aiayn.text.documents import translate_document

from .documents import docx_bytes, odp_bytes, odt_bytes, pptx_bytes, shout

SOFFICE = shutil.which("soffice") or shutil.which("libreoffice")
pytestmark = pytest.mark.skipif(
    SOFFICE is None,
    reason="LibreOffice (soffice) is not on PATH: test_documents.py reads each output "
    "with its format's own library instead",
)

# format, fixture, what LibreOffice converts it to, words of the translation it must show
# (and none of the sources' own words)
CASES = [
    ("docx", docx_bytes, "txt", ["THE DOGS OF THE PARK", "RUNS QUICKLY", "BLACK DOGS", "42"]),
    ("odt", odt_bytes, "txt", ["THE DOGS OF THE PARK", "RUNS QUICKLY", "10:30.", "42"]),
    ("pptx", pptx_bytes, "odp", ["DOGS IN THE PARK", "RUNS QUICKLY", "SAY HELLO TO THE"]),
    ("odp", odp_bytes, "odp", ["DOGS IN THE PARK AND MORE", "CATS ON 3 CHAIRS", "SLIDE 2."]),
]
GONE = ("The dogs", "Dogs in", "runs quickly", "black dog", "Cats on", "Say hello")
FILTERS = {"txt": "txt:Text (encoded):UTF8", "odp": "odp"}


def _converted_text(path: Path, to: str) -> str:
    """The text of ``path`` as LibreOffice reads it, converted to ``to`` (plain text, or a
    presentation whose every paragraph odfpy then reads)."""
    out = path.parent / "converted"
    profile = (path.parent / "profile").as_uri()  # its own, so parallel runs do not meet
    convert = ["--convert-to", FILTERS[to], "--outdir", str(out), str(path)]
    done = subprocess.run(
        [SOFFICE, f"-env:UserInstallation={profile}", "--headless", "--norestore", *convert],
        capture_output=True,
        text=True,
        timeout=180,
    )
    converted = out / f"{path.stem}.{to}"
    assert done.returncode == 0 and converted.is_file(), done.stdout + done.stderr
    if to == "txt":
        return converted.read_text(encoding="utf-8")
    from odf import teletype, text
    from odf.opendocument import load

    document = load(str(converted))
    return "\n".join(teletype.extractText(p) for p in document.getElementsByType(text.P))


@pytest.mark.parametrize(("name", "make", "to", "wanted"), CASES, ids=[c[0] for c in CASES])
def test_libreoffice_opens_the_translated_document(name, make, to, wanted, tmp_path):
    pytest.importorskip("odf")
    source = make()
    path = tmp_path / f"translated.{name}"
    path.write_bytes(translate_document(source, name, shout))
    read = _converted_text(path, to)
    for words in wanted:
        assert words in read, read
    assert not [words for words in GONE if words in read], read
