"""Documents state the present: no narrative of how the code was built in ``src/``, and the
README stays a landing page."""

from __future__ import annotations

import re

from aiayn.config_io import load_toml

from .blocks import REPO, documents

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


def test_every_speed_ratio_in_the_readme_names_its_precision_and_hardware():
    lines = (REPO / "README.md").read_text(encoding="utf-8").splitlines()
    table = lines[lines.index("## Results") :]
    ratios = [line for line in table if line.startswith("| ") and re.search(r"\d×", line)]
    assert len(ratios) >= 5  # the decoding, training, language-model and serving rows
    for row in ratios:
        what, figure, machine, _command = row.strip("|").split(" | ")
        assert re.search(r"\b(fp32|bf16|float32|bfloat16|int8)\b", what + figure), row
        assert re.search(r"core|GPU|H100|A100|CPU", machine), row


def test_the_main_jobs_time_budget_is_the_one_its_recipe_sets():
    """Each "N-minute budget" of the README and the English pages is the main job's (what
    ``bash scripts/run.sh`` runs), and its figure is the recipe's ``run.max_minutes``."""
    values = load_toml(str(REPO / "configs" / "multi30k_en_de_tiny_raw.toml"))
    budget = values["run"]["max_minutes"]
    pages = [REPO / "README.md", *documents()]
    named = {
        f"{page.relative_to(REPO)}: {m[0]}": int(m[1])
        for page in pages
        for m in re.finditer(r"(\d+)-minute budget", page.read_text(encoding="utf-8"))
    }
    assert len(named) >= 3
    assert all(minutes == budget for minutes in named.values()), named
