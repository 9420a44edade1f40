"""The documentation's translations (``page.ko.md``, ``page.zh.md`` beside ``page.md``, built by
mkdocs-static-i18n) are the English pages in another language: every language mkdocs.yml
builds has the quick start and the tutorial, each with the English page's sections in the same
order, depth and anchors, its boxes, links and numbers, the same pictures and the very same code
blocks (which therefore run once, in English: ``blocks.documents()``), in prose written in
that language's script."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml

from .blocks import FENCE, REPO, blocks, documents, translation_of

slugify = pytest.importorskip("markdown.extensions.toc", reason="mkdocs (dev extra)").slugify

DOCS = REPO / "docs"
# the learner's path: the landing page, the quick start, the tutorial and its map of other
# tutorials' names, translating and scoring, one's own corpus, serving, the Korean guide and
# troubleshooting
REQUIRED = (
    "index.md",
    "start.md",
    "tutorial/paper.md",
    "tutorial/names.md",
    "how-to/translate.md",
    "how-to/own-corpus.md",
    "how-to/serve.md",
    "how-to/korean.md",
    "troubleshooting.md",
)
HEADING = re.compile(r"^(?P<level>#{1,6}) (?P<title>.+?)(?: \{#(?P<id>[^}\s]+)\})?$")
ADMONITION = re.compile(r"^\s*(?:!!!|\?\?\?\+?) (?P<kind>[\w-]+)")  # !!! note "...", ??? success
NUMBER = re.compile(r"§[\d.]*\d|^\d+\.")  # the paper's section numbers, a page's own steps
LINK = re.compile(r"(?<!!)\[[^\]]*\]\((?P<target>[^)\s]+)\)")
PICTURE = re.compile(r"!\[[^\]]*\]\((?P<target>[^)\s]+)|<img [^>]*src=\"(?P<src>[^\"]+)\"")
INLINE_CODE = re.compile(r"`[^`\n]*`|\\\[.*?\\\]|\$[^$\n]*\$|\]\([^)]*\)", re.DOTALL)
SCRIPT = {"ko": re.compile(r"[\uac00-\ud7a3]"), "zh": re.compile(r"[\u4e00-\u9fff]")}
LATIN = re.compile(r"[A-Za-z]")
FIGURE = re.compile(r"\d+(?:[.,]\d+)*")  # 41.19, 29,000, §3.2.1's 3.2.1


class _AnyTagLoader(yaml.SafeLoader):
    """mkdocs.yml as data: a tag (``!ENV``, ``!!python/name:``) reads as null."""


_AnyTagLoader.add_multi_constructor("", lambda loader, suffix, node: None)


def _config() -> dict:
    return yaml.load((REPO / "mkdocs.yml").read_text(encoding="utf-8"), Loader=_AnyTagLoader)


def _i18n_languages() -> list[dict]:
    config = _config()
    plugin = next(p["i18n"] for p in config["plugins"] if isinstance(p, dict) and "i18n" in p)
    return plugin["languages"]


def languages() -> list[str]:
    """The languages besides English that mkdocs.yml builds (its i18n plugin's locales)."""
    return [lang["locale"] for lang in _i18n_languages() if not lang.get("default")]


def _nav_titles(items: list) -> list[str]:
    titles = []
    for item in items:
        if isinstance(item, dict):
            for title, below in item.items():
                titles.append(title)
                if isinstance(below, list):
                    titles += _nav_titles(below)
    return titles


def test_every_menu_title_is_translated():
    """Every title of the site's menu, the how-to guides' included, in each language."""
    titles = _nav_titles(_config()["nav"])
    for language in _i18n_languages():
        if language.get("default"):
            continue
        named = language.get("nav_translations") or {}
        missing = [t for t in titles if t not in named]
        assert not missing, f"{language['locale']}: menu titles not translated: {missing}"


def translations() -> list[Path]:
    return sorted(page for page in DOCS.rglob("*.md") if translation_of(page) is not None)


def _prose(page: Path) -> list[str]:
    """The page's lines outside its fenced code blocks."""
    lines, inside = [], False
    for line in page.read_text(encoding="utf-8").splitlines():
        if FENCE.match(line) and not inside:
            inside = True
        elif inside and line.strip() == "```":
            inside = False
        elif not inside:
            lines.append(line)
    return lines


def sections(page: Path) -> list[tuple[int, str, list[str]]]:
    """Each heading's depth, anchor (its ``{#id}``, else its title's slug, as the toc extension
    makes it: a translation keeps the English anchors, which links from other pages name) and
    the section numbers it names (§3.2.1, a step's 1.)."""
    found = (HEADING.match(line) for line in _prose(page))
    return [
        (len(h["level"]), h["id"] or slugify(h["title"], "-"), NUMBER.findall(h["title"]))
        for h in found
        if h
    ]


def admonitions(page: Path) -> list[str]:
    """The kinds of the page's boxes (``!!! note``, ``??? success``), in order."""
    return [m["kind"] for m in map(ADMONITION.match, _prose(page)) if m]


def pictures(page: Path) -> list[str]:
    text = "\n".join(_prose(page))
    return [m["target"] or m["src"] for m in PICTURE.finditer(text)]


def links(page: Path) -> list[str]:
    """Where the page's links go, sorted (a translation may name them in another order)."""
    return sorted(LINK.findall("\n".join(_prose(page))))


def figures(page: Path) -> set[str]:
    """The numbers written in the page's prose (outside its code blocks)."""
    return set(FIGURE.findall("\n".join(_prose(page))))


def script_share(page: Path, language: str) -> float:
    """Of the letters of the page's prose (outside code, formulas and link targets), the share
    written in ``language``'s script."""
    text = INLINE_CODE.sub("", "\n".join(_prose(page)))
    native = len(SCRIPT[language].findall(text))
    return native / max(1, native + len(LATIN.findall(text)))


PAIRS = [(page, translation_of(page)) for page in translations()]
IDS = [str(page.relative_to(DOCS)) for page, _ in PAIRS]


def test_every_language_has_the_quick_start_and_the_tutorial():
    assert languages(), "mkdocs.yml builds no language besides English"
    for language in languages():
        for name in REQUIRED:
            page = (DOCS / name).with_suffix(f".{language}.md")
            assert page.is_file(), f"{page.relative_to(REPO)} is missing"
    for page, english in PAIRS:
        assert english.is_file(), f"{page.relative_to(REPO)} translates no English page"
        assert page.name.split(".")[-2] in languages(), f"{page.name}: not in mkdocs.yml"


def test_translations_run_no_block_twice():
    runnable = set(documents())
    for page, english in PAIRS:
        assert page not in runnable and english in runnable


@pytest.mark.parametrize(("page", "english"), PAIRS, ids=IDS)
def test_a_translation_has_the_english_sections_pictures_and_code(page, english):
    assert sections(page) == sections(english), "headings differ in depth, anchor or number"
    assert admonitions(page) == admonitions(english)
    assert pictures(page) == pictures(english)
    assert links(page) == links(english), "links differ: is the translation behind its page?"
    assert not figures(english) - figures(page), "numbers of the English page are missing"
    translated = [(b.lang, b.code, b.mark, b.why) for b in blocks(page)]
    assert translated == [(b.lang, b.code, b.mark, b.why) for b in blocks(english)]


@pytest.mark.parametrize(("page", "english"), PAIRS, ids=IDS)
def test_a_translation_is_written_in_its_language(page, english):
    language = page.name.split(".")[-2]
    # not more: code names, glosses (어텐션(attention)) and names of tools stay in Latin letters
    assert script_share(page, language) > 0.3, "mostly untranslated"
    assert script_share(english, language) < 0.05  # it names Korean and Chinese books


def test_the_checks_see_a_missing_section_picture_and_block(tmp_path):
    english = DOCS / "tutorial" / "paper.md"
    text = english.read_text(encoding="utf-8")
    cut = tmp_path / "paper.ko.md"
    cut.write_text(text.replace("### §3.2.2", "#### §3.2.2", 1), encoding="utf-8")
    assert sections(cut) != sections(english)
    renamed = text.replace("## §3.3 Position-wise", "## §3.3 포지션-와이즈", 1)
    cut.write_text(renamed, encoding="utf-8")
    assert sections(cut) != sections(english)  # the anchor #33-position-wise-... is gone
    cut.write_text(
        renamed.replace("networks\n", "networks {#33-position-wise-feed-forward-networks}\n", 1),
        encoding="utf-8",
    )
    assert sections(cut) == sections(english)
    cut.write_text(re.sub(r"!\[[^\]]*\]\(figures/masks\.png\)", "", text), encoding="utf-8")
    assert pictures(cut) != pictures(english)
    cut.write_text(text.replace("(names.md)", "(walkthrough.py)", 1), encoding="utf-8")
    assert links(cut) != links(english)
    cut.write_text(text.replace("β2 = 0.98", "β2 = 0.99", 1), encoding="utf-8")
    assert figures(english) - figures(cut) == {"0.98"}
    cut.write_text(text.replace('attention.py:heads"', 'attention.py:head"', 1), encoding="utf-8")
    assert [b.code for b in blocks(cut)] != [b.code for b in blocks(english)]
