"""The web page in a real browser: headless Chromium loads ``/?q=...``, which translates on
load; its DOM must hold the translation, each sentence underlined with its own confidence,
and the screenshot must show the heatmap."""

from __future__ import annotations

import re
import shutil
import subprocess
from urllib.parse import quote

import pytest

from aiayn.translate.translator import Translator

from .conftest import Server, expected_translations

pytest.importorskip("fastapi", reason="the serve extra is a dev dependency")
Image = pytest.importorskip("PIL.Image", reason="pillow is a dev dependency")

BOX = (243, 246, 250)  # #f3f6fa, the translation box
BROWSER = shutil.which("chromium") or shutil.which("chromium-browser") or shutil.which("chrome")
pytestmark = pytest.mark.skipif(
    BROWSER is None,
    reason="no Chromium here (scripts/test.sh installs Debian's chromium where it can)",
)


def _chromium(*args: str) -> subprocess.CompletedProcess:
    flags = [
        "--headless=new",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-dev-shm-usage",
        "--virtual-time-budget=30000",
        "--window-size=1100,1500",
    ]
    return subprocess.run([BROWSER, *flags, *args], capture_output=True, text=True, timeout=120)


@pytest.mark.slow
def test_the_page_translates_and_draws_the_attention(en_de, tmp_path):
    sentence = "The dog runs. The cat sleeps on the house."
    s = Server(en_de)
    try:
        # one load gives both: the DOM, then the screenshot of the same page
        dom = _chromium(
            "--dump-dom", f"--screenshot={tmp_path / 'page.png'}", f"{s.url}/?q={quote(sentence)}"
        )
    finally:
        s.stop()
    [[expected]] = Translator.from_dir(en_de).translate([sentence])
    box = _translation_box(dom.stdout)
    assert re.sub(r"<[^>]+>", "", box) == expected.text, dom.stderr[-2000:]
    underlined = re.findall(r'<span class="sentence" title="confidence (\d\.\d\d)"[^>]*>', box)
    shown = [f"{s.confidence:.2f}" for s in expected.sentences if s.text]
    assert len(expected.sentences) == 2 and underlined == shown  # one per sentence, its own
    assert f"by sentence: {', '.join(shown)}" in dom.stdout  # and said in words
    assert 'src="blob:' in dom.stdout  # the heatmap image was fetched and shown
    assert "Drawing the attention picture" in dom.stdout  # said while it is drawn
    assert '<small id="drawing" role="status"></small>' in dom.stdout  # and gone once shown
    assert dom.returncode == 0, dom.stderr[-2000:]
    image = Image.open(tmp_path / "page.png").convert("RGB")
    assert _text_in_translation_box(image), "the translation box is empty in the screenshot"
    assert _viridis_pixels(image) > 2000, "no attention heatmap in the screenshot"


@pytest.mark.slow
def test_the_page_offers_every_served_pair_and_translates_with_the_chosen_one(en_de, fr_de):
    sentence = "the dog runs"
    s = Server(en_de, "--model", str(fr_de))
    try:
        dom = _chromium("--dump-dom", f"{s.url}/?q={quote(sentence)}&source=fr&target=de")
    finally:
        s.stop()
    assert '<option value="en de">' in dom.stdout and '<option value="fr de"' in dom.stdout
    expected = {model: expected_translations(model, [sentence])[0] for model in (en_de, fr_de)}
    assert expected[en_de] != expected[fr_de]  # the test tells the two apart
    assert re.sub(r"<[^>]+>", "", _translation_box(dom.stdout)) == expected[fr_de]


def _translation_box(dom: str) -> str:
    """What the translation box holds in the page's DOM, its markup included."""
    found = re.search(r'<div id="translation"[^>]*>(.*?)</div>', dom, re.DOTALL)
    assert found, dom[-2000:]
    return found.group(1)


def _text_in_translation_box(image) -> bool:
    """Dark (text) pixels inside the translation box, found by its background colour."""
    pixels = image.load()
    width, height = image.size
    box = [(x, y) for y in range(height) for x in range(0, width, 4) if pixels[x, y] == BOX]
    if not box:
        return False
    top, bottom = min(y for _, y in box), max(y for _, y in box)
    left, right = min(x for x, _ in box), max(x for x, _ in box)
    crop = image.crop((left, top, right, bottom))
    return sum(n for n, colour in crop.getcolors(1 << 20) or [] if sum(colour) < 200) > 20


def _viridis_pixels(image) -> int:
    """Pixels in colours of the viridis map (what ``aiayn plot attention`` draws with)."""
    from matplotlib import colormaps

    viridis = {tuple(round(255 * c) for c in colormaps["viridis"](i / 255)[:3]) for i in range(256)}
    near = {
        (r + dr, g + dg, b + db)
        for r, g, b in viridis
        for dr in (-1, 0, 1)
        for dg in (-1, 0, 1)
        for db in (-1, 0, 1)
    }
    return sum(n for n, colour in image.getcolors(1 << 20) or [] if colour in near)
