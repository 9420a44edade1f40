"""The fenced code blocks of the README and the documentation, and how each is tested.

A ``python`` or ``bash`` block is run; a block of any other language (``toml``, ``text``,
``json``), or one that only includes source (``--8<-- "src/..."``), is shown, not run. An
HTML comment on the line before a fence changes that:

- ``<!-- test: skip (why) -->``: not run, for the reason given (training for an hour, a
  download); the reason is required.
- ``<!-- test: background (why) -->``: started and left running (a server) while the
  document's later blocks run, then stopped; it must answer ``GET /health`` on the port it
  names with ``--port``.
- ``<!-- test: once (why) -->``: a document's first runnable block, the quick try that makes
  what the guide works on (a small model); run once for all the documents that start with
  the same block, whose scratch directories get a copy of the files it made.
- ``<!-- test: output -->``: on a ``text`` block right after a runnable one, what that block
  prints (its standard output and error): each line shown is a line it prints, in order
  (an excerpt may leave lines out, a ``...`` line says so), numbers allowed to differ
  (``shown_in``).

A document's blocks run in order, in a fresh scratch directory outside the repository that
holds the repository's ``configs/`` (what a clone gives) and nothing else: what a block
uses, an earlier block of the same document made or fetched. Each block stands alone (a
Python block does not see the names of the one before it).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
RUN = {"python", "bash"}
MARK = re.compile(r"<!-- test: (?P<mark>skip|background|once|output)(?: \((?P<why>[^)]*)\))? -->")
NUMBER = re.compile(r"[-+]?\d[\d,]*(?:\.\d+)?(?:e[-+]?\d+)?")
FENCE = re.compile(r"^(?P<indent> *)```(?P<lang>[\w-]*)[^\n]*$")
TRANSLATION = re.compile(r"\.(?P<language>[a-z]{2})\.md$")  # page.ko.md: page.md in Korean


@dataclass(frozen=True)
class Block:
    document: Path
    line: int  # of the opening fence, from 1
    lang: str
    code: str
    mark: str | None  # "skip", "background", "once" or None
    why: str | None

    @property
    def includes_source(self) -> bool:
        """The block is filled with source by the docs build (``--8<-- "src/..."``)."""
        return all(line.startswith("--8<--") for line in self.code.split("\n") if line.strip())

    @property
    def runs(self) -> bool:
        return self.lang in RUN and self.mark != "skip" and not self.includes_source

    def __str__(self) -> str:
        return f"{self.document.relative_to(REPO)}:{self.line}"


def _shape(line: str) -> str:
    """A line with every number as ``#`` and its spacing folded: what must match."""
    return " ".join(NUMBER.sub("#", line).split())


def shown_in(shown: str, printed: str) -> str | None:
    """None when every line of ``shown`` (an output block) is a line of ``printed``, in
    order, numbers aside (``...`` lines skipped); else the first line that is not."""
    lines = iter(_shape(line) for line in printed.splitlines())
    for line in shown.splitlines():
        if not line.strip() or line.strip() == "...":
            continue
        want = _shape(line)
        if not any(got == want for got in lines):
            return line
    return None


def translation_of(page: Path) -> Path | None:
    """The English page that ``page`` translates (``start.ko.md`` -> ``start.md``), or None."""
    found = TRANSLATION.search(page.name)
    return page.with_name(page.name[: found.start()] + ".md") if found else None


def documents() -> list[Path]:
    """The README and every English Markdown page of the documentation. A translation
    (``page.ko.md``) holds its English page's blocks unchanged (``test_translations.py``),
    so they run once, in English."""
    pages = sorted((REPO / "docs").rglob("*.md"))
    return [REPO / "README.md", *(page for page in pages if translation_of(page) is None)]


def blocks(document: Path) -> list[Block]:
    """The fenced blocks of ``document``, in order, with the mark on the line before each."""
    lines = document.read_text(encoding="utf-8").splitlines()
    found, i = [], 0
    while i < len(lines):
        opening = FENCE.match(lines[i])
        if not opening:
            i += 1
            continue
        indent, fence_line = opening["indent"], i
        body = []
        i += 1
        while i < len(lines) and lines[i].strip() != "```":
            body.append(lines[i][len(indent) :] if lines[i].startswith(indent) else lines[i])
            i += 1
        mark = MARK.fullmatch(lines[fence_line - 1].strip()) if fence_line else None
        found.append(
            Block(
                document=document,
                line=fence_line + 1,
                lang=opening["lang"],
                code="\n".join(body) + "\n",
                mark=mark["mark"] if mark else None,
                why=mark["why"] if mark else None,
            )
        )
        i += 1
    return found
