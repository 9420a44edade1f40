"""Documents state the present: no narrative of how the code was built in ``src/``, and the
README stays a landing page."""

from __future__ import annotations

import re

from .blocks import REPO

NARRATIVE = re.compile(
    r"main job|this session|the round before|sessions? (back|ago|after)|this machine's noise",
    re.IGNORECASE,
)


def test_the_source_narrates_nothing():
    found = [
        f"{path.relative_to(REPO)}:{number}: {line.strip()}"
        for path in sorted((REPO / "src").rglob("*.py"))
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
        if NARRATIVE.search(line)
    ]
    assert not found, "\n".join(found)


def test_the_readme_is_a_landing_page():
    lines = (REPO / "README.md").read_text(encoding="utf-8").splitlines()
    assert len(lines) <= 150, f"README.md has {len(lines)} lines"
    headings = [line for line in lines if line.startswith("## ")]
    for heading in ("## Install", "## Quick start", "## Results", "## Documentation"):
        assert heading in headings, heading
